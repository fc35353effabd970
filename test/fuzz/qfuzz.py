#!/usr/bin/env python3
"""Random query fuzzer for delta_join.

Makes a fixed random schema (4 tables), then in batches: generates random
SELECT queries, runs delta_join.explain() and create_view() on each (strategy
auto, the default, sometimes retract), runs random DML on the sources, calls
delta_join.wait(), and compares every target with its query over the current
data (EXCEPT ALL both ways; one way for an upsert-mode view, whose residual
rows are documented).

  runuser -u postgres -- python3 test/fuzz/qfuzz.py --psql $BIN/psql \
      --port 6301 --db postgres --seed 1 --minutes 10 [--bias 0.8] [--trace /tmp/t.sql]

It DROPs and re-CREATEs the extension and the tables s1..s4 in --db: give it
a scratch database.  --bias 0.8 makes most joins bind indexed columns, so
more queries take the delta paths (the default mostly makes recomputes).
Drives psql (no driver needed): --psql (or PSQL) names the binary.  Findings
(FINDING [wrong|internal|explain-disagree|wait]) go to stdout and to --log
(default /tmp/qfuzz.log), each with its query; views that went to error for
a user-level reason are noted there too.  A seed replays the same queries
and data changes; replay.py cuts a --trace down to one view.
"""
import argparse, os, random, re, subprocess, sys, time

# ---------------------------------------------------------------- psql driver

class Psql:
    def __init__(self, cmd):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.n = 0
        self.run("\\set VERBOSITY verbose\n\\pset format unaligned\n\\pset tuples_only on\n"
                 "\\pset fieldsep '|'\nSET client_min_messages = warning;")

    def run(self, sql, timeout=None):
        """Run sql; return (output lines, error text or None)."""
        self.n += 1
        mark = "__QF_%d__" % self.n
        self.p.stdin.write(sql.rstrip() + "\n\\echo " + mark + "\n")
        self.p.stdin.flush()
        out = []
        while True:
            line = self.p.stdout.readline()
            if line == "":
                raise RuntimeError("psql died; output so far: %r" % out)
            line = line.rstrip("\n")
            if line == mark:
                break
            out.append(line)
        err = [l for l in out if re.match(r"^(psql:.*)?(ERROR|FATAL|PANIC|server closed|connection to server)", l)
               or "ERROR:" in l]
        return out, ("\n".join(err) if err else None)

    def close(self):
        try:
            self.p.stdin.write("\\q\n"); self.p.stdin.flush(); self.p.wait(5)
        except Exception:
            self.p.kill()

# ---------------------------------------------------------------- schema

# column: (name, type, class, nullable)   class: i (small ints), t (text), n (numeric),
# d (date), b (bool), j (jsonb)
TABLES = {
    "s1": dict(pk=["id"], cols=[("id", "int", "i", False), ("a", "int", "i", True), ("b", "bigint", "i", True),
                                  ("n", "numeric(10,2)", "n", True), ("s", "text", "t", True), ("d", "date", "d", True),
                                  ("f", "bool", "b", True), ("j", "jsonb", "j", True)],
               idx=[["a"], ["b", "s"]], full=False),
    "s2": dict(pk=["id"], cols=[("id", "bigint", "i", False), ("s1_id", "int", "i", True), ("a", "int", "i", True),
                                  ("s", "text", "t", True), ("n", "numeric", "n", True), ("d", "date", "d", True)],
               idx=[["s1_id"], ["a"]], full=True),
    "s3": dict(pk=["k1", "k2"], cols=[("k1", "int", "i", False), ("k2", "int", "i", False), ("a", "int", "i", True),
                                        ("s", "text", "t", True), ("f", "bool", "b", True)],
               idx=[["a"]], full=False),
    "s4": dict(pk=["id"], cols=[("id", "int", "i", False), ("s2_id", "bigint", "i", False), ("a", "int", "i", False),
                                  ("s", "text", "t", True), ("j", "jsonb", "j", True)],
               idx=[["s2_id"], ["s", "a"]], full=True),
}

# columns that lead a btree index (the primary key's first included)
LEADING = {t: set([d["pk"][0]] + [ix[0] for ix in d["idx"]]) for t, d in TABLES.items()}

def schema_sql():
    out = []
    for t, d in TABLES.items():
        cols = ", ".join("%s %s%s" % (c, ty, "" if nul else " NOT NULL") for c, ty, _, nul in d["cols"])
        out.append("DROP TABLE IF EXISTS %s CASCADE;" % t)
        out.append("CREATE TABLE %s (%s, PRIMARY KEY (%s));" % (t, cols, ", ".join(d["pk"])))
        for ix in d["idx"]:
            out.append("CREATE INDEX ON %s (%s);" % (t, ", ".join(ix)))
        if d["full"]:
            out.append("ALTER TABLE %s REPLICA IDENTITY FULL;" % t)
    return "\n".join(out)

def rval(r, cls, nullable=True, pnull=0.15):
    if nullable and r.random() < pnull:
        return "NULL"
    if cls == "i":
        return str(r.randint(0, 12))
    if cls == "t":
        return r.choice(["'x'", "'y'", "'z'", "''", "'X'"])
    if cls == "n":
        return r.choice(["0", "1.5", "2.50", "-3", "10.25", "1.0"])
    if cls == "d":
        return "date '2024-01-01' + %d" % r.randint(0, 5)
    if cls == "b":
        return r.choice(["true", "false"])
    if cls == "j":
        return r.choice(["'{}'", "'{\"k\": 1}'", "'{\"k\": 2, \"m\": [1]}'", "'[1,2]'", "'null'", "'\"x\"'"])
    raise ValueError(cls)

def row_values(r, t):
    return [rval(r, cls, nul) for c, ty, cls, nul in TABLES[t]["cols"]]

def seed_sql(r, rows=25):
    out = []
    for t in TABLES:
        for _ in range(rows):
            out.append("INSERT INTO %s VALUES (%s) ON CONFLICT DO NOTHING;" % (t, ", ".join(row_values(r, t))))
    return "\n".join(out)

# ---------------------------------------------------------------- DML

def dml_stmt(r):
    t = r.choice(list(TABLES))
    d = TABLES[t]
    k = r.random()
    pk = d["pk"][0]
    if k < 0.35:
        n = r.randint(1, 3)
        rows = ", ".join("(%s)" % ", ".join(row_values(r, t)) for _ in range(n))
        return "INSERT INTO %s VALUES %s ON CONFLICT DO NOTHING;" % (t, rows)
    if k < 0.75:
        c, ty, cls, nul = r.choice(d["cols"])
        if r.random() < 0.3:
            val = "%s + 1" % c if cls == "i" else rval(r, cls, nul)
        else:
            val = rval(r, cls, nul)
        where = "%s = %s" % (pk, rval(r, "i", False)) if r.random() < 0.7 else \
                "%s IS NULL OR %s < %d" % (d["cols"][2][0], d["cols"][2][0], r.randint(0, 6))
        return "UPDATE %s SET %s = %s WHERE %s;" % (t, c, val, where)
    if k < 0.97:
        where = "%s = %s" % (pk, rval(r, "i", False)) if r.random() < 0.8 else \
                "%s = %s" % (d["cols"][2][0], rval(r, "i", False))
        return "DELETE FROM %s WHERE %s;" % (t, where)
    return "TRUNCATE %s;" % t

def dml_round(r):
    """One round: a list of SQL texts, each run alone (a failure aborts only it)."""
    out = []
    for _ in range(r.randint(3, 10)):
        if r.random() < 0.3:
            stmts = " ".join(dml_stmt(r) for _ in range(r.randint(2, 5)))
            end = "ROLLBACK;" if r.random() < 0.2 else "COMMIT;"
            out.append("BEGIN; %s %s" % (stmts, end))
        else:
            out.append(dml_stmt(r))
    return out

# ---------------------------------------------------------------- queries

class Q:
    """A query generator; each instance makes one query."""
    def __init__(self, r, bias=0.0):
        self.r = r
        self.bias = bias        # how often a join binds indexed columns
        self.nalias = 0

    def alias(self):
        self.nalias += 1
        return "x%d" % self.nalias

    def cols(self, refs, cls=None):
        out = []
        for a, t in refs:
            for c, ty, k, nul in TABLES[t]["cols"]:
                if cls is None or k == cls:
                    out.append(("%s.%s" % (a, c), k))
        return out

    def col(self, refs, cls=None):
        if cls == "ord":
            cs = [c for c in self.cols(refs) if c[1] in "itnd"]
        else:
            cs = self.cols(refs, cls)
        return self.r.choice(cs) if cs else None

    def expr(self, refs, cls=None, depth=0):
        """A scalar expression of class cls (None: any); returns (sql, cls)."""
        r = self.r
        c = self.col(refs, cls)
        if c is None:
            return rval(r, cls, False), cls
        e, k = c
        if depth > 1 or r.random() < 0.6:
            return e, k
        ch = r.random()
        if k == "i":
            if ch < 0.25: return "(%s + %s)" % (e, r.randint(0, 3)), k
            if ch < 0.4: return "coalesce(%s, %s)" % (e, r.randint(0, 3)), k
            if ch < 0.55: return "(CASE WHEN %s > %d THEN %s ELSE %d END)" % (e, r.randint(0, 8), e, r.randint(0, 3)), k
            if ch < 0.7: return "abs(%s - %d)" % (e, r.randint(0, 5)), k
            if ch < 0.8: return "(%s)::bigint" % e, k
            return "(%s %% 3)" % e, k
        if k == "t":
            if ch < 0.3: return "upper(%s)" % e, k
            if ch < 0.5: return "coalesce(%s, 'none')" % e, k
            if ch < 0.7: return "(%s || '_')" % e, k
            return "(%s)::text" % e, k
        if k == "n":
            if ch < 0.5: return "round(%s, 1)" % e, k
            return "(%s * 2)" % e, k
        if k == "j":
            if ch < 0.5: return "(%s ->> 'k')" % e, "t"
            return "jsonb_typeof(%s)" % e, "t"
        if k == "d":
            return "(%s + 1)" % e, k
        if k == "b":
            return "(NOT %s)" % e, k
        return e, k

    def pred(self, refs, depth=0, allow_sub=True):
        r = self.r
        ch = r.random()
        if depth < 2 and ch < 0.15:
            return "(%s AND %s)" % (self.pred(refs, depth + 1, allow_sub), self.pred(refs, depth + 1, allow_sub))
        if depth < 2 and ch < 0.25:
            return "(%s OR %s)" % (self.pred(refs, depth + 1, allow_sub), self.pred(refs, depth + 1, allow_sub))
        if depth < 2 and ch < 0.3:
            return "NOT (%s)" % self.pred(refs, depth + 1, allow_sub)
        if allow_sub and ch < 0.38:
            return self.subpred(refs)
        e, k = self.expr(refs)
        ch = r.random()
        if ch < 0.15:
            return "%s IS %sNULL" % (e, r.choice(["", "NOT "]))
        if k == "i":
            if ch < 0.3: return "%s IN (%s)" % (e, ", ".join(str(r.randint(0, 12)) for _ in range(r.randint(1, 4))))
            if ch < 0.45: return "%s BETWEEN %d AND %d" % (e, r.randint(0, 5), r.randint(4, 12))
            if ch < 0.55:
                e2, _ = self.expr(refs, "i")
                return "%s %s %s" % (e, r.choice(["=", "<", "<>", "<="]), e2)
            if ch < 0.6:
                e2, _ = self.expr(refs, "i")
                return "%s IS DISTINCT FROM %s" % (e, e2)
            return "%s %s %d" % (e, r.choice(["=", "<", ">", "<>", ">="]), r.randint(0, 12))
        if k == "t":
            if ch < 0.4: return "%s IN ('x', 'y')" % e
            if ch < 0.6: return "%s LIKE 'x%%'" % e
            return "%s %s %s" % (e, r.choice(["=", "<>", ">"]), rval(r, "t", False))
        if k == "n":
            return "%s %s %s" % (e, r.choice(["=", "<", ">"]), rval(r, "n", False))
        if k == "d":
            return "%s %s date '2024-01-03'" % (e, r.choice(["=", "<", ">="]))
        if k == "b":
            return r.choice(["%s", "NOT %s", "%s IS TRUE", "%s IS NOT FALSE"]) % e
        if k == "j":
            return r.choice(["%s ? 'k'", "%s @> '{\"k\": 1}'", "%s = '{}'"]) % e
        return "true"

    def subpred(self, refs):
        r = self.r
        t = r.choice(list(TABLES))
        a = self.alias()
        inner = [(a, t)]
        oc, _ = self.col(refs, "i")
        ic, _ = self.col(inner, "i")
        extra = ""
        if r.random() < 0.4:
            extra = " AND " + self.pred(inner, 2, False)
        ch = r.random()
        if ch < 0.35:
            return "%sEXISTS (SELECT 1 FROM %s %s WHERE %s = %s%s)" % (
                r.choice(["", "NOT "]), t, a, ic, oc, extra)
        if ch < 0.7:
            return "%s %sIN (SELECT %s FROM %s %s WHERE true%s)" % (
                oc, r.choice(["", "NOT "]), ic, t, a, extra)
        if ch < 0.85:
            return "%s %s (SELECT %s(%s) FROM %s %s WHERE %s = %s%s)" % (
                oc, r.choice(["=", "<", ">="]), r.choice(["max", "min", "count"]), ic, t, a, ic, oc, extra)
        return "EXISTS (SELECT 1 FROM %s %s WHERE %s %s %s%s)" % (t, a, ic, r.choice(["<", ">"]), oc, extra)

    def join_cond(self, left_refs, right):
        r = self.r
        a, t = right
        # key-ish joins most of the time
        pairs = []
        rc = self.cols([right], "i")
        lc = self.cols(left_refs, "i")
        l, _ = r.choice(lc)
        rr, _ = r.choice(rc)
        if r.random() < self.bias:
            # columns that lead an index on both sides: a delta join's lookups
            li = [c for c in lc if c[0].split(".")[1] in LEADING[dict(left_refs)[c[0].split(".")[0]]]]
            ri = [c for c in rc if c[0].split(".")[1] in LEADING[t]]
            if li and ri:
                l, rr = r.choice(li)[0], r.choice(ri)[0]
                cond = "%s = %s" % (l, rr)
                if r.random() < 0.1:
                    cond += " AND " + self.pred([right], 2, False)
                return cond
        ch = r.random()
        if ch < 0.1:
            cond = "%s + 1 = %s" % (l, rr)
        elif ch < 0.15:
            cond = "%s < %s" % (l, rr)
        else:
            cond = "%s = %s" % (l, rr)
        if r.random() < 0.2:
            l2, _ = r.choice(lc); r2, _ = r.choice(rc)
            cond += " AND %s = %s" % (l2, r2)
        if r.random() < 0.2:
            cond += " AND " + self.pred([right], 2, False)
        if r.random() < 0.08:
            cond += " AND %s IS NULL" % self.col(left_refs)[0]
        return cond

    def from_clause(self, ntab):
        """Returns (sql, refs): refs = [(alias, table)] visible in the select list."""
        r = self.r
        refs = []
        t = r.choice(list(TABLES))
        a = self.alias()
        sql = "%s %s" % (t, a)
        if r.random() < 0.1:
            # subquery in FROM of one table
            sub = "(SELECT * FROM %s WHERE %s)" % (t, self.pred([(t, t)], 1, False))
            sql = "%s %s" % (sub, a)
        refs.append((a, t))
        for _ in range(ntab - 1):
            t2 = r.choice(list(TABLES))
            a2 = self.alias()
            jt = r.choices(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"], [6, 3, 1, 1])[0]
            cond = self.join_cond(refs, (a2, t2))
            sql += " %s %s %s ON %s" % (jt, t2, a2, cond)
            refs.append((a2, t2))
        return sql, refs

    def key_cols(self, refs):
        out = []
        for a, t in refs:
            for c in TABLES[t]["pk"]:
                out.append("%s.%s" % (a, c))
        return out

    def spj(self, ntab=None):
        r = self.r
        ntab = ntab or r.choices([1, 2, 3], [3, 5, 2])[0]
        frm, refs = self.from_clause(ntab)
        sel = []
        if r.random() < 0.85:
            sel += self.key_cols(refs)
        for _ in range(r.randint(1, 4)):
            sel.append(self.expr(refs)[0])
        if r.random() < 0.1:
            sel.append("CASE WHEN %s THEN 0 ELSE 1 END" % self.pred(refs, 2, False))
        if r.random() < 0.05:
            sel.append("(SELECT count(*) FROM s3 z WHERE z.a = %s)" % self.col(refs, "i")[0])
        q = "SELECT %s FROM %s" % (", ".join("%s AS c%d" % (e, i) for i, e in enumerate(sel)), frm)
        if r.random() < 0.6 * (1 - self.bias / 2):
            q += " WHERE " + self.pred(refs)
        return q, refs, len(sel)

    def agg(self):
        r = self.r
        ntab = r.choices([1, 2, 3], [5, 4, 1])[0]
        frm, refs = self.from_clause(ntab)
        gk = []
        for _ in range(r.randint(0, 2) if r.random() < 0.9 else 0):
            gk.append(self.expr(refs)[0] if r.random() < 0.2 else self.col(refs)[0])
        aggs = []
        for _ in range(r.randint(1, 3)):
            ic = self.col(refs, "i")[0]
            ch = r.random()
            if ch < 0.2: a = "count(*)"
            elif ch < 0.3: a = "count(%s)" % self.col(refs)[0]
            elif ch < 0.45: a = "sum(%s)" % ic
            elif ch < 0.5: a = "sum(%s)" % self.col(refs, "n")[0] if self.col(refs, "n") else "sum(%s)" % ic
            elif ch < 0.6: a = "avg(%s)" % ic
            elif ch < 0.7: a = "min(%s)" % self.col(refs, "ord")[0]
            elif ch < 0.8: a = "max(%s)" % self.col(refs, "ord")[0]
            elif ch < 0.85:
                b = self.col(refs, "b")
                a = "bool_and(%s)" % b[0] if b else "bool_or(%s > 3)" % ic
            elif ch < 0.92: a = "count(DISTINCT %s)" % self.col(refs)[0]
            else: a = "count(*) FILTER (WHERE %s)" % self.pred(refs, 2, False)
            aggs.append(a)
        sel = gk + aggs
        q = "SELECT %s FROM %s" % (", ".join("%s AS c%d" % (e, i) for i, e in enumerate(sel)), frm)
        if r.random() < 0.4:
            q += " WHERE " + self.pred(refs, 1)
        if gk:
            q += " GROUP BY %s" % ", ".join(gk)
            if r.random() < 0.25:
                q += " HAVING count(*) > %d" % r.randint(0, 2)
        return q

    def distinct(self):
        r = self.r
        frm, refs = self.from_clause(r.choices([1, 2, 3], [3, 5, 1])[0])
        sel = [self.col(refs)[0] if r.random() < 0.8 else self.expr(refs)[0] for _ in range(r.randint(1, 3))]
        q = "SELECT DISTINCT %s FROM %s" % (", ".join("%s AS c%d" % (e, i) for i, e in enumerate(sel)), frm)
        if r.random() < 0.5:
            q += " WHERE " + self.pred(refs)
        return q

    def union(self):
        r = self.r
        parts = []
        for i in range(r.randint(2, 3)):
            frm, refs = self.from_clause(r.choice([1, 2]))
            keys = self.key_cols(refs)
            kk = keys[0] if r.random() < 0.9 else self.col(refs, "i")[0]
            tag = "'b%d'" % i if r.random() < 0.9 else "'b'"
            s = "SELECT %s AS tag, (%s)::bigint AS k, (%s)::text AS v FROM %s" % (
                tag, kk, self.expr(refs)[0], frm)
            if len(keys) > 1:
                s = s.replace(" AS k,", " AS k, (%s)::bigint AS k2," % keys[1])
            else:
                s = s.replace(" AS k,", " AS k, 0::bigint AS k2,")
            if r.random() < 0.5:
                s += " WHERE " + self.pred(refs, 1)
            parts.append(s)
        return " UNION ALL ".join(parts)

    def window(self):
        r = self.r
        frm, refs = self.from_clause(r.choice([1, 2]))
        keys = self.key_cols(refs)
        p = self.col(refs)[0]
        o = self.col(refs)[0]
        f = r.choice(["count(*) OVER (PARTITION BY %s)" % p, "sum(%s) OVER (PARTITION BY %s)" % (self.col(refs, "i")[0], p),
                      "rank() OVER (PARTITION BY %s ORDER BY %s)" % (p, o), "dense_rank() OVER (ORDER BY %s)" % o,
                      "max(%s) OVER (PARTITION BY %s)" % (self.col(refs, "ord")[0], p)])
        sel = keys + [f]
        return "SELECT %s FROM %s" % (", ".join("%s AS c%d" % (e, i) for i, e in enumerate(sel)), frm)

    def limit(self):
        q, refs, n = self.spj()
        return q + " ORDER BY %s LIMIT %d" % (", ".join("%d NULLS FIRST" % (i + 1) for i in range(n)), self.r.randint(1, 10))

    def cte(self):
        r = self.r
        t = r.choice(list(TABLES))
        inner = Q(r); inner.nalias = 50
        ch = r.random()
        if ch < 0.5:
            body = "SELECT * FROM %s WHERE %s" % (t, inner.pred([(t, t)], 1, False))
            t2 = r.choice(list(TABLES))
            on = "%s = %s" % (self.col([("w", t)], "i")[0], self.col([("y", t2)], "i")[0])
            return "WITH w AS (%s) SELECT %s FROM w JOIN %s y ON %s" % (
                body, ", ".join("%s AS c%d" % (e, i) for i, e in enumerate(
                    self.key_cols([("w", t), ("y", t2)]) + [self.expr([("w", t), ("y", t2)])[0]])), t2, on)
        body = "SELECT %s AS g, count(*) AS n FROM %s GROUP BY 1" % (self.col([(t, t)])[0], t)
        return "WITH w AS (%s) SELECT g AS c0, n AS c1 FROM w WHERE n > %d" % (body, r.randint(0, 2))

    def lateral(self):
        r = self.r
        t = r.choice(list(TABLES)); t2 = r.choice(list(TABLES))
        oc = self.col([("o", t)], "i")[0]
        ic = self.col([("l", t2)], "i")[0]
        return "SELECT %s, l.m AS cm FROM %s o %s JOIN LATERAL (SELECT max(%s) AS m FROM %s l WHERE %s = %s) l ON true" % (
            ", ".join("%s AS c%d" % (e, i) for i, e in enumerate(self.key_cols([("o", t)]))),
            t, r.choice(["", "LEFT"]), self.col([("l", t2)], "ord")[0], t2, ic, oc)

    def values(self):
        r = self.r
        t = r.choice(list(TABLES))
        c = self.col([("o", t)], "i")[0]
        vals = ", ".join("(%d, '%s')" % (r.randint(0, 12), r.choice("pqr")) for _ in range(r.randint(1, 4)))
        return "SELECT %s, v.lbl AS cl FROM %s o JOIN (VALUES %s) AS v(k, lbl) ON v.k = %s" % (
            ", ".join("%s AS c%d" % (e, i) for i, e in enumerate(self.key_cols([("o", t)]))), t, vals, c)

def gen_query(r, bias=0.0):
    q = Q(r, bias)
    kind = r.choices(["spj", "agg", "distinct", "union", "window", "limit", "cte", "lateral", "values"],
                     [30, 25, 10, 8, 5, 5, 6, 4, 4])[0]
    if kind == "spj":
        return kind, q.spj()[0]
    return kind, getattr(q, kind)()

# ---------------------------------------------------------------- driver

def explain_mode(lines, strategy):
    for l in lines:
        m = re.search(r"strategy: %s, mode: (.*)$" % strategy, l)
        if m:
            return m.group(1).strip()
    return None

BAD = re.compile(r"XX000|cache lookup failed|unrecognized node|terminated by signal|PANIC|TRAP|server closed|"
                 r"XX001|XX002|internal error|unexpected|could not find|invalid memory|58P0|so where|no relation entry|variable not found|failed to|wrong|should not", re.I)

class Fuzzer:
    def __init__(self, args):
        self.a = args
        self.r = random.Random(args.seed)
        self.psql = Psql(args.psql_cmd)
        self.log = open(args.log, "a")
        self.stats = dict(queries=0, views=0, create_err=0, rounds=0, checks=0, findings=0, explain_err=0)
        self.trace = open(args.trace, "w") if args.trace else None

    def finding(self, kind, msg):
        self.stats["findings"] += 1
        text = "FINDING [%s] %s" % (kind, msg)
        print(text, flush=True)
        self.log.write(text + "\n\n"); self.log.flush()

    def q(self, sql):
        if self.trace:
            self.trace.write(sql.rstrip() + "\n")
        out, err = self.psql.run(sql)
        if err and BAD.search(err):
            self.finding("internal", "%s\n  -- from: %s" % (err, sql[:2000]))
        return out, err

    def query_fails(self, query):
        """Does PostgreSQL itself refuse to plan the query?  explain() judges
        a query without planning it (FULL JOIN ... ON a < b is refused by the
        planner only), so create_view failing there is no disagreement."""
        _, err = self.psql.run("EXPLAIN %s;" % query)
        return err is not None

    def setup(self):
        self.q("DROP EXTENSION IF EXISTS delta_join CASCADE;")
        # the targets of an earlier run stay as plain tables
        self.q("DO $$DECLARE t text; BEGIN FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
               "AND tablename ~ '^v[0-9]+_[0-9]+_' LOOP EXECUTE format('DROP TABLE %I', t); END LOOP; END$$;")
        self.q(schema_sql())
        self.q("CREATE EXTENSION delta_join;")
        self.q(seed_sql(self.r))

    def batch(self, bno):
        views = []  # (target, query, strategy, options, mode)
        for i in range(self.a.queries):
            kind, query = gen_query(self.r, self.a.bias)
            self.stats["queries"] += 1
            lines_auto, err = self.q("SELECT * FROM delta_join.explain($Q$%s$Q$, strategy => 'auto');" % query)
            if err:
                self.stats["explain_err"] += 1
                if "42" not in err[:30] and not re.search(r"ERROR:  (42|22|0A)", err):
                    self.log.write("explain error: %s\n  %s\n" % (err, query))
            lines_ev, _ = self.q("SELECT * FROM delta_join.explain($Q$%s$Q$);" % query)
            m_auto = explain_mode(lines_auto, "auto")
            m_ev = explain_mode(lines_ev, "eventual")
            tries = [("auto", None, m_auto), ("eventual", None, m_ev)]
            if self.r.random() < 0.35:
                tries.append(("eventual", '{"retract": true}', None))
            if self.r.random() < 0.15:
                tries.append(("auto", '{"retract": true}', None))
            if self.r.random() < 0.15:
                tries.append(("eventual", '{"ignore_non_unique_key_filter": true}', None))
            for strat, opts, predicted in tries:
                tgt = "v%d_%d_%s" % (bno, i, "a" if strat == "auto" else "e") + ("" if not opts else "r" if "retract" in opts else "i")
                call = "SELECT delta_join.create_view('%s', $Q$%s$Q$, strategy => '%s'%s);" % (
                    tgt, query, strat, ", options => '%s'" % opts if opts else "")
                out, err = self.q(call)
                ok = err is None
                if opts is None:
                    if ok and predicted is None:
                        self.finding("explain-disagree", "explain(%s) says not eligible, create_view succeeded: %s" % (strat, query))
                    if not ok and predicted is not None and not self.query_fails(query):
                        self.finding("explain-disagree", "explain(%s) says %s, create_view failed: %s\n  %s" % (strat, predicted, err, query))
                if not ok:
                    self.stats["create_err"] += 1
                    if strat == "auto" and opts is None:
                        self.log.write("auto create error: %s\n  %s\n" % (err, query))
                    continue
                self.stats["views"] += 1
                mo, _ = self.q("SELECT kind || '|' || mode FROM delta_join.views WHERE target = 'public.%s';" % tgt)
                kind_mode = mo[0] if mo else "?|?"
                views.append(dict(t=tgt, q=query, s=strat, o=opts, km=kind_mode, kind=kind))
        for rnd in range(self.a.rounds):
            for stmt in dml_round(self.r):
                self.q(stmt)
            self.stats["rounds"] += 1
            self.check(views, rnd)
        for v in views:
            self.q("SELECT delta_join.drop_view('%s');" % v["t"])

    def check(self, views, rnd):
        out, err = self.q("SELECT delta_join.wait(timeout => '60s');")
        waited = out and out[-1].strip() == "t"
        if not waited:
            self.finding("wait", "wait() returned %r %r" % (out, err))
        for v in views:
            if v.get("dead"):
                continue
            st, _ = self.q("SELECT state || '|' || coalesce(last_error, '') FROM delta_join.status WHERE target = 'public.%s';" % v["t"])
            state = st[0] if st else "?"
            if not state.startswith("active"):
                v["dead"] = True
                if BAD.search(state):
                    self.finding("internal", "view %s state %s\n  query: %s" % (v["t"], state, v["q"]))
                else:
                    self.log.write("view %s left active: %s\n  %s\n" % (v["t"], state, v["q"]))
                continue
            km = v["km"]
            # upsert mode leaves residual rows (README): a join's, an aggregate's past HAVING
            upsert = km.endswith("|delta") and (not km.startswith("aggregate") or "HAVING" in v["q"])
            qq = v["q"]
            sql = ("SELECT (SELECT count(*) FROM (SELECT * FROM %s EXCEPT ALL SELECT * FROM (%s) q) x), "
                   "(SELECT count(*) FROM ((%s) EXCEPT ALL SELECT * FROM %s) y);" % (v["t"], qq, qq, v["t"]))
            out, err = self.q(sql)
            self.stats["checks"] += 1
            if err:
                self.log.write("check error %s: %s\n  %s\n" % (v["t"], err, qq))
                v["dead"] = True
                continue
            try:
                extra, missing = [int(x) for x in out[-1].split("|")]
            except Exception:
                self.log.write("check output? %r\n" % out); continue
            if missing or (extra and not upsert):
                self.finding("wrong", "view %s (%s, strategy %s, options %s) after round %d: %d extra, %d missing rows; status active, wait %s\n  query: %s" % (
                    v["t"], km, v["s"], v["o"], rnd, extra, missing, waited, qq))
                v["dead"] = True

    def main(self):
        self.setup()
        t0 = time.time()
        for b in range(self.a.batches):
            if self.a.deadline and time.time() > self.a.deadline:
                break
            self.batch(b)
            print("batch %d done %s (%.0fs)" % (b, self.stats, time.time() - t0), flush=True)
            if b % 5 == 4:
                # refill the tables now and then
                self.q("TRUNCATE s1, s2, s3, s4;")
                self.q(seed_sql(self.r))
        print("FINAL", self.stats, flush=True)
        self.psql.close()

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", default="6301")
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--db", default="postgres")
    ap.add_argument("--psql", default=os.environ.get("PSQL", "psql"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bias", type=float, default=0.0, help="0..1: how often joins bind indexed columns (more delta views)")
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--log", default="/tmp/qfuzz.log")
    ap.add_argument("--minutes", type=float, default=0)
    ap.add_argument("--trace", help="write every statement run to this file (replay with test/fuzz/replay.py)")
    ap.add_argument("--print", type=int, default=0, help="only print N queries")
    a = ap.parse_args()
    if a.print:
        r = random.Random(a.seed)
        for _ in range(a.print):
            print("%s: %s;" % gen_query(r, a.bias))
        sys.exit(0)
    a.deadline = time.time() + a.minutes * 60 if a.minutes else 0
    a.psql_cmd = [a.psql, "-X", "-q", "-h", a.host, "-p", a.port, "-d", a.db, "-v", "ON_ERROR_STOP=0"]
    Fuzzer(a).main()
