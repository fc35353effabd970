--
-- Pinned settings: a view is backfilled, refreshed and applied with the
-- settings of its creator's session at creation (TimeZone, DateStyle,
-- IntervalStyle, extra_float_digits, lc_*, ...), whatever the apply
-- worker's or a later caller's settings are, so that stable built-ins such
-- as timestamptz::date, ::text and to_char() give the same result in every
-- row (DESIGN.md §3 rule 4).
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA pin;
SET search_path = pin, public;

CREATE TABLE events (id bigint PRIMARY KEY, at timestamptz, span interval, ratio float8);
INSERT INTO events VALUES (1, '2024-03-01 23:30:00+00', '1 day 2 hours', 0.1);

\set q 'SELECT id, at::date AS day, at::text AS at_text, to_char(at, ''YYYY-MM-DD HH24:MI TZ'') AS shown, span::text AS span_text, ratio::text AS ratio_text FROM events'

-- the creator works in Tokyo, with German dates and ISO 8601 intervals
SET TimeZone = 'Asia/Tokyo';
SET DateStyle = 'German, DMY';
SET IntervalStyle = 'iso_8601';
SET extra_float_digits = 0;
SELECT delta_join.create_view('local_events', :'q');
SELECT settings ->> 'TimeZone' AS tz, settings ->> 'DateStyle' AS datestyle,
       settings ->> 'IntervalStyle' AS intervalstyle, settings ->> 'extra_float_digits' AS efd
FROM delta_join.views WHERE target = 'pin.local_events';
-- the lc_* categories a session can set are pinned too (this machine has
-- only the C locales, so no output shows them at work)
SELECT ARRAY(SELECT k FROM jsonb_object_keys(settings) k WHERE k LIKE 'lc%' ORDER BY k) AS lc_pinned
FROM delta_join.views WHERE target = 'pin.local_events';

-- a caller elsewhere (and the worker, with the server's settings) writes
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;
INSERT INTO events VALUES (2, '2024-03-02 16:00:00+00', '90 minutes', 1.0 / 3);
UPDATE events SET at = at + interval '1 hour' WHERE id = 1;
SELECT delta_join.wait('pin.local_events');

-- every row is as the creator's session computes it ...
SET TimeZone = 'Asia/Tokyo';
SET DateStyle = 'German, DMY';
SET IntervalStyle = 'iso_8601';
SET extra_float_digits = 0;
SELECT * FROM diff('local_events', :'q');
SELECT * FROM local_events ORDER BY id;
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;
-- ... which is not what this session computes
SELECT (SELECT missing FROM diff('local_events', :'q')) > 0 AS differs_here;

-- refresh(), called from this session, uses the pinned settings too
SELECT delta_join.refresh('pin.local_events');
SET TimeZone = 'Asia/Tokyo';
SET DateStyle = 'German, DMY';
SET IntervalStyle = 'iso_8601';
SET extra_float_digits = 0;
SELECT * FROM diff('local_events', :'q');
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;

-- an aggregate view too: each group is recomputed with the pinned settings
SET TimeZone = 'America/Los_Angeles';
CREATE TABLE visits (shop int, id bigint, at timestamptz, PRIMARY KEY (shop, id));
SELECT delta_join.create_view('visit_hours', $$
  SELECT shop, string_agg(to_char(at, 'HH24'), ',' ORDER BY id) AS hours FROM visits GROUP BY shop $$);
RESET TimeZone;
INSERT INTO visits VALUES (1, 1, '2024-03-01 20:00:00+00'), (1, 2, '2024-03-01 21:00:00+00');
SELECT delta_join.wait('pin.visit_hours');
-- hours of the day in Los Angeles, not in this session's time zone
SELECT * FROM visit_hours;

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA pin CASCADE;
RESET client_min_messages;
RESET search_path;
