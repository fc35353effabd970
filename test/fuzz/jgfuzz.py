#!/usr/bin/env python3
"""test/fuzz/jgfuzz.py: qfuzz.py with a generator aimed at the path of groups
through joins (aggregates -- counts and sums among them, which take the
additive apply -- and DISTINCT over inner joins, semi- and anti-joins), every
table REPLICA IDENTITY FULL so that the path is eligible.  Same options as
qfuzz.py.  JG_SP=1 wraps the random writes in transactions with savepoints
(ROLLBACK TO, RELEASE, ROLLBACK); JG_GEN=q keeps qfuzz's own generator (with
the savepoints)."""
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qfuzz
from qfuzz import Q, TABLES, rval

if os.environ.get("JG_GEN") != "q":
    for t in TABLES.values():
        t["full"] = True

def jcond(q, left_refs, right):
    r = q.r
    lc = q.cols(left_refs, "i"); rc = q.cols([right], "i")
    l = r.choice(lc)[0]; rr = r.choice(rc)[0]
    ch = r.random()
    cond = "%s = %s" % (l, rr)
    if ch < 0.05:
        cond = "%s + 1 = %s" % (l, rr)
    if r.random() < 0.2:
        cond += " AND %s = %s" % (r.choice(lc)[0], r.choice(rc)[0])
    if r.random() < 0.2:
        cond += " AND " + q.pred([right], 2, False)
    return cond

def inner_from(q, ntab):
    r = q.r
    t = r.choice(list(TABLES)); a = q.alias()
    sql = "%s %s" % (t, a); refs = [(a, t)]
    for _ in range(ntab - 1):
        t2 = r.choice(list(TABLES)); a2 = q.alias()
        sql += " JOIN %s %s ON %s" % (t2, a2, jcond(q, refs, (a2, t2)))
        refs.append((a2, t2))
    return sql, refs

def aggs(q, refs):
    r = q.r
    out = []
    for _ in range(r.randint(1, 3)):
        ic = q.col(refs, "i")[0]
        ch = r.random()
        if ch < 0.2: a = "count(*)"
        elif ch < 0.3: a = "count(%s)" % q.col(refs)[0]
        elif ch < 0.45: a = "sum(%s)" % ic
        elif ch < 0.5: a = "sum(%s)" % q.col(refs, "n")[0] if q.col(refs, "n") else "sum(%s)" % ic
        elif ch < 0.6: a = "avg(%s)" % ic
        elif ch < 0.7: a = "min(%s)" % q.col(refs, "ord")[0]
        elif ch < 0.8: a = "max(%s)" % q.col(refs, "ord")[0]
        elif ch < 0.85:
            b = q.col(refs, "b")
            a = "bool_and(%s)" % b[0] if b else "bool_or(%s > 3)" % ic
        elif ch < 0.92: a = "count(DISTINCT %s)" % q.col(refs)[0]
        else: a = "count(*) FILTER (WHERE %s)" % q.pred(refs, 2, False)
        out.append(a)
    return out

def sel(items):
    return ", ".join("%s AS c%d" % (e, i) for i, e in enumerate(items))

def jg_agg(q):
    r = q.r
    frm, refs = inner_from(q, r.choices([2, 3], [3, 1])[0])
    gk = list(dict.fromkeys(q.col(refs)[0] for _ in range(r.randint(1, 2))))
    s = "SELECT %s FROM %s" % (sel(gk + aggs(q, refs)), frm)
    if r.random() < 0.4:
        s += " WHERE " + q.pred(refs, 1, False)
    s += " GROUP BY " + ", ".join(gk)
    if r.random() < 0.25:
        s += r.choice([" HAVING count(*) > %d" % r.randint(0, 2), " HAVING sum(%s) > %d" % (q.col(refs, "i")[0], r.randint(0, 10))])
    return s

def jg_distinct(q):
    r = q.r
    frm, refs = inner_from(q, r.choices([2, 3], [3, 1])[0])
    cs = list(dict.fromkeys(q.col(refs)[0] for _ in range(r.randint(1, 3))))
    s = "SELECT DISTINCT %s FROM %s" % (sel(cs), frm)
    if r.random() < 0.4:
        s += " WHERE " + q.pred(refs, 1, False)
    return s

NOTNULL = {("s1", "id"), ("s2", "id"), ("s3", "k1"), ("s3", "k2"), ("s4", "id"), ("s4", "s2_id"), ("s4", "a")}

def sub(q, refs, anti):
    r = q.r
    frm, irefs = inner_from(q, r.choices([1, 2], [3, 1])[0])
    oc = q.col(refs, "i")[0]
    ia, it = irefs[0]
    ic = q.col(irefs, "i")[0]
    extra = ""
    if r.random() < 0.4:
        extra = " AND " + q.pred(irefs, 2, False)
    if r.random() < 0.6:
        if r.random() < 0.2:
            oc2 = q.col(refs, "i")[0]; ic2 = q.col(irefs, "i")[0]
            extra += " AND %s = %s" % (ic2, oc2)
        return "%sEXISTS (SELECT 1 FROM %s WHERE %s = %s%s)" % ("NOT " if anti else "", frm, ic, oc, extra)
    if anti:
        # NOT IN over NOT NULL columns where possible
        ocs = [c for c in q.cols(refs, "i") if (dict(refs)[c[0].split(".")[0]], c[0].split(".")[1]) in NOTNULL]
        ics = [c for c in q.cols(irefs, "i") if (dict(irefs)[c[0].split(".")[0]], c[0].split(".")[1]) in NOTNULL]
        if ocs and ics and r.random() < 0.8:
            oc = r.choice(ocs)[0]; ic = r.choice(ics)[0]
    return "%s %sIN (SELECT %s FROM %s WHERE true%s)" % (oc, "NOT " if anti else "", ic, frm, extra)

def semi(q, anti=False):
    r = q.r
    frm, refs = inner_from(q, r.choices([1, 2], [3, 1])[0])
    if r.random() < 0.8:
        items = q.key_cols(refs) + [q.col(refs)[0] for _ in range(r.randint(0, 2))]
        items = list(dict.fromkeys(items))
        head = "SELECT %s" % sel(items)
    else:
        items = list(dict.fromkeys(q.col(refs)[0] for _ in range(r.randint(1, 2))))
        head = "SELECT DISTINCT %s" % sel(items)
    conds = [sub(q, refs, anti)]
    if r.random() < 0.3:
        conds.append(q.pred(refs, 2, False))
    if r.random() < 0.15:
        conds.append(sub(q, refs, r.random() < 0.5))
    r.shuffle(conds)
    return "%s FROM %s WHERE %s" % (head, frm, " AND ".join(conds))

def gen_query(r, bias=0.0):
    q = Q(r, bias)
    kind = r.choices(["agg", "distinct", "semi", "anti"], [40, 20, 20, 20])[0]
    if kind == "agg": return kind, jg_agg(q)
    if kind == "distinct": return kind, jg_distinct(q)
    return kind, semi(q, kind == "anti")

if os.environ.get("JG_GEN") != "q":
    qfuzz.gen_query = gen_query
if os.environ.get("JG_SP"):
    def dml_round(r):
        out = []
        for _ in range(r.randint(3, 10)):
            if r.random() < 0.5:
                parts = []
                for i in range(r.randint(2, 5)):
                    if r.random() < 0.35:
                        parts.append("SAVEPOINT p%d; %s %s" % (i, qfuzz.dml_stmt(r), r.choice(["ROLLBACK TO SAVEPOINT p%d;" % i, "RELEASE SAVEPOINT p%d;" % i, ""])))
                    else:
                        parts.append(qfuzz.dml_stmt(r))
                end = "ROLLBACK;" if r.random() < 0.1 else "COMMIT;"
                out.append("BEGIN; %s %s" % (" ".join(parts), end))
            else:
                out.append(qfuzz.dml_stmt(r))
        return out
    qfuzz.dml_round = dml_round
if __name__ == "__main__":
    sys.argv[0] = qfuzz.__file__
    exec(compile(open(qfuzz.__file__).read().split('if __name__ == "__main__":')[1].replace("\n    ", "\n"), "main", "exec"), qfuzz.__dict__)
