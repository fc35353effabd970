--
-- What every pg_regress test file starts with (\i sql/include/setup.sql; pg_regress runs psql in
-- the top directory with the file on standard input), so
-- that each file runs on its own as well as after the others:
--
--  - the extension;
--  - diff(target, query): the rows of the query missing from the target, the
--    rows of the target the query does not return (both with EXCEPT ALL, so
--    duplicates count), and the number of rows of the target.  A target that
--    equals its query gives 0 | 0 | <rows>;
--  - oracle_views(): the plan oracle (below) over every view's query.
--
-- diff() is also a plan oracle: it runs the query under each plan of
-- dj_plans() -- the session's own, then with one kind of plan node turned
-- off at a time, then with parallel plans forced and with none -- and
-- compares each result with the target.  Every plan must give the same
-- answer; when one does not, diff() warns "the query's result depends on
-- the plan": a determinism bug (create_view must refuse such a query), not
-- a target that differs from its query.  All plans read one snapshot (the
-- function is STABLE), so a change committed meanwhile cannot look like
-- one.  The TAP tests' DeltaJoinTest::target_ok runs the same plans.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS delta_join;

-- The plans every query is run under: a label, and the settings that make
-- the planner choose otherwise (the first, none: the session's plan).
-- diff() turns JIT off for all of them: a plan node turned off costs
-- 1e10, far above jit_above_cost, and compiling would take longer than
-- running (JIT changes no result).
CREATE OR REPLACE FUNCTION public.dj_plans(OUT label text, OUT settings jsonb)
RETURNS SETOF record LANGUAGE sql IMMUTABLE AS $f$
  VALUES ('as planned', '{}'::jsonb),
         ('enable_hashagg = off', '{"enable_hashagg": "off"}'),
         ('enable_sort = off', '{"enable_sort": "off"}'),
         ('enable_seqscan = off', '{"enable_seqscan": "off"}'),
         ('enable_nestloop = off', '{"enable_nestloop": "off"}'),
         ('enable_hashjoin = off', '{"enable_hashjoin": "off"}'),
         ('enable_mergejoin = off', '{"enable_mergejoin": "off"}'),
         ('parallel plans forced',
          '{"parallel_setup_cost": "0", "parallel_tuple_cost": "0",
            "min_parallel_table_scan_size": "0", "max_parallel_workers_per_gather": "2"}'),
         ('no parallel plan', '{"max_parallel_workers_per_gather": "0"}')
$f$;

CREATE OR REPLACE FUNCTION public.diff(target regclass, query text,
                                       OUT missing bigint, OUT extra bigint,
                                       OUT target_rows bigint)
LANGUAGE plpgsql STABLE AS $f$
DECLARE
  plan record;
  setting record;
  saved jsonb;
  jit_saved text := current_setting('jit');
  m bigint;
  e bigint;
  qn bigint;
  query_rows bigint;
  differing text[] := '{}';
BEGIN
  PERFORM set_config('jit', 'off', true);
  FOR plan IN SELECT * FROM public.dj_plans() LOOP
    saved := '{}';
    FOR setting IN SELECT * FROM jsonb_each_text(plan.settings) LOOP
      saved := saved || jsonb_build_object(setting.key, current_setting(setting.key));
      PERFORM set_config(setting.key, setting.value, true);
    END LOOP;

    EXECUTE format($q$
      WITH dj_query AS MATERIALIZED (%s), dj_target AS MATERIALIZED (TABLE %s)
      SELECT (SELECT count(*) FROM (TABLE dj_query EXCEPT ALL TABLE dj_target) d),
             (SELECT count(*) FROM (TABLE dj_target EXCEPT ALL TABLE dj_query) d),
             (SELECT count(*) FROM dj_query), (SELECT count(*) FROM dj_target)$q$,
      query, target)
      INTO m, e, qn, target_rows;

    FOR setting IN SELECT * FROM jsonb_each_text(saved) LOOP
      PERFORM set_config(setting.key, setting.value, true);
    END LOOP;

    IF missing IS NULL THEN
      missing := m;
      extra := e;
      query_rows := qn;
    ELSIF (m, e, qn) IS DISTINCT FROM (missing, extra, query_rows) THEN
      differing := differing || format('%s: %s rows, %s of them missing from the target, %s rows of the target not among them',
                                       plan.label, qn, m, e);
    END IF;
  END LOOP;

  PERFORM set_config('jit', jit_saved, true);

  IF cardinality(differing) > 0 THEN
    RAISE WARNING 'the query''s result depends on the plan'
      USING DETAIL = format('As planned: %s rows, %s of them missing from the target, %s rows of the target not among them; %s.',
                            query_rows, missing, extra, array_to_string(differing, '; ')),
            HINT = 'A query whose result depends on the plan cannot be maintained: create_view must refuse it (rule 4).';
  END IF;
END $f$;

-- plans_differing(query): the plans of dj_plans() under which the query's
-- rows differ from those as planned -- compared as a multiset of their
-- text forms (their number and the sum of their hashes), all under one
-- snapshot; none when the result does not depend on the plan.
CREATE OR REPLACE FUNCTION public.plans_differing(query text)
RETURNS text[] LANGUAGE plpgsql STABLE AS $f$
DECLARE
  plan record;
  setting record;
  saved jsonb;
  jit_saved text := current_setting('jit');
  fingerprint text;
  first text;
  differing text[] := '{}';
BEGIN
  PERFORM set_config('jit', 'off', true);
  FOR plan IN SELECT * FROM public.dj_plans() LOOP
    saved := '{}';
    FOR setting IN SELECT * FROM jsonb_each_text(plan.settings) LOOP
      saved := saved || jsonb_build_object(setting.key, current_setting(setting.key));
      PERFORM set_config(setting.key, setting.value, true);
    END LOOP;
    EXECUTE format('SELECT count(*) || '' rows, '' || coalesce(sum(hashtextextended(r::text, 0)::numeric), 0)
                    FROM (%s) r', query)
      INTO fingerprint;
    FOR setting IN SELECT * FROM jsonb_each_text(saved) LOOP
      PERFORM set_config(setting.key, setting.value, true);
    END LOOP;
    IF first IS NULL THEN
      first := fingerprint;
    ELSIF fingerprint <> first THEN
      differing := differing || plan.label;
    END IF;
  END LOOP;
  PERFORM set_config('jit', jit_saved, true);
  RETURN differing;
END $f$;

-- oracle_views(): the plan oracle over the query of every active view
-- (read from its query view, as bound; a view in error may have lost the
-- right to read its sources): how many were checked, and those whose
-- result depends on the plan.  Each file calls it before it drops its
-- views, so that every query accepted in the suite is checked.
CREATE OR REPLACE FUNCTION public.oracle_views(OUT views bigint, OUT depend_on_the_plan text)
LANGUAGE sql STABLE AS $f$
  SELECT count(*),
         string_agg(target || ' (' || array_to_string(differing, ', ') || ')', '; ' ORDER BY target)
           FILTER (WHERE cardinality(differing) > 0)
  FROM (SELECT v.target, public.plans_differing('TABLE ' || v.query_view) AS differing
        FROM delta_join.views v WHERE v.state = 'active' AND v.query_view IS NOT NULL) d
$f$;
RESET client_min_messages;
