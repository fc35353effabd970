--
-- Installing delta_join
--
-- The test server preloads the library and decodes WAL (see
-- test/regress.conf.in), so CREATE EXTENSION succeeds.  TAP test
-- t/001_install.pl shows how it fails on servers that are not set up.
--
CREATE EXTENSION delta_join;

-- Everything lives in schema delta_join.
SELECT extname, extversion, extnamespace::regnamespace AS schema
FROM pg_extension WHERE extname = 'delta_join';

-- The settings a new view takes its defaults from, with their defaults.
SELECT name, setting, unit FROM pg_settings
WHERE name LIKE 'delta_join.%' ORDER BY 1;

-- "force" is accepted as the streaming engines' name for "eventual", in
-- any case; unknown names are rejected with the list of valid ones.
SET delta_join.strategy = 'FORCE';
SHOW delta_join.strategy;
SET delta_join.strategy = 'sometimes';
RESET delta_join.strategy;

-- Nobody can invent a setting in the reserved delta_join prefix.
SET delta_join.no_such_setting = 1;

-- diff(target, query), used by the other tests to compare a target with its
-- query: the rows of the query missing from the target, the rows of the
-- target the query does not return (both with EXCEPT ALL, so duplicates
-- count), and the number of rows of the target.  A target that equals its
-- query gives 0 | 0 | <rows>.
CREATE FUNCTION public.diff(target regclass, query text,
                            OUT missing bigint, OUT extra bigint, OUT target_rows bigint)
LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE format('SELECT count(*) FROM ((%s) EXCEPT ALL TABLE %s) d', query, target)
    INTO missing;
  EXECUTE format('SELECT count(*) FROM (TABLE %s EXCEPT ALL (%s)) d', target, query)
    INTO extra;
  EXECUTE format('SELECT count(*) FROM %s', target) INTO target_rows;
END $f$;
