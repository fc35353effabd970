--
-- What every pg_regress test file starts with (\i sql/include/setup.sql; pg_regress runs psql in
-- the top directory with the file on standard input), so
-- that each file runs on its own as well as after the others:
--
--  - the extension;
--  - diff(target, query): the rows of the query missing from the target, the
--    rows of the target the query does not return (both with EXCEPT ALL, so
--    duplicates count), and the number of rows of the target.  A target that
--    equals its query gives 0 | 0 | <rows>.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS delta_join;
CREATE OR REPLACE FUNCTION public.diff(target regclass, query text,
                                       OUT missing bigint, OUT extra bigint,
                                       OUT target_rows bigint)
LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE format('SELECT count(*) FROM ((%s) EXCEPT ALL TABLE %s) d', query, target)
    INTO missing;
  EXECUTE format('SELECT count(*) FROM (TABLE %s EXCEPT ALL (%s)) d', target, query)
    INTO extra;
  EXECUTE format('SELECT count(*) FROM %s', target) INTO target_rows;
END $f$;
RESET client_min_messages;
