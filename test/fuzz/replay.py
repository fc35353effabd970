#!/usr/bin/env python3
"""Cut a qfuzz.py trace down to one view, for minimizing a finding.

  python3 test/fuzz/replay.py TRACE TARGET OUTDIR

writes OUTDIR/pre.sql (the schema and every data change before TARGET was
created: run it in a fresh database, then CREATE EXTENSION delta_join) and
OUTDIR/post.sql (TARGET's create_view, then the data changes after it,
each delta_join.wait() of the trace followed by a check of the target
against its query: 'CHECK', extra rows, missing rows).  Drop statements
from post.sql (or move them into pre.sql) until the check stops failing.
"""
import os, re, sys

def main(trace, target, outdir):
    lines = open(trace).read().split("\n")
    at = None
    for i, l in enumerate(lines):
        if "create_view('%s'," % target in l:
            at = i
            break
    if at is None:
        sys.exit("no create_view of %s in %s" % (target, trace))
    create = lines[at]
    m = re.search(r"\$Q\$(.*)\$Q\$", create)
    query = m.group(1)
    pre, post = [], [create]
    for i, l in enumerate(lines):
        meta = l.startswith(("SELECT", "\\", "DROP EXTENSION", "CREATE EXTENSION"))
        if i < at:
            if not meta:
                pre.append(l)
        elif i > at:
            if "delta_join.wait" in l:
                post.append("SELECT delta_join.wait();")
                post.append("SELECT 'CHECK', (SELECT count(*) FROM (SELECT * FROM %s EXCEPT ALL (%s)) x), "
                            "(SELECT count(*) FROM ((%s) EXCEPT ALL SELECT * FROM %s) y);" % (target, query, query, target))
            elif not meta:
                post.append(l)
    os.makedirs(outdir, exist_ok=True)
    open(os.path.join(outdir, "pre.sql"), "w").write("\n".join(pre) + "\n")
    open(os.path.join(outdir, "post.sql"), "w").write("\n".join(post) + "\n")

if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
