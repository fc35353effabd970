--
-- Installing delta_join
--
-- The test server preloads the library and decodes WAL (see
-- test/server_conf.sh), so CREATE EXTENSION succeeds.  TAP test
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
