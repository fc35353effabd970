/*-------------------------------------------------------------------------
 *
 * analyze_join.c
 *	  The join of a view's sources: conditions, classes of equal columns,
 *	  index prefixes and lookups (rules 2 and 3), the result's unique key
 *	  and the filters that could leave rows behind or keep the NULLs of an
 *	  outer join's nullable side (rules 6 and 8).
 *
 * Every column of every source has a column id; join conditions merge the
 * ids of the columns they equate into classes (union-find), which say
 * which output column can stand for which key column.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "catalog/pg_am.h"
#include "catalog/pg_opclass.h"
#include "commands/defrem.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "analysis/analysis.h"

/*
 * The column id of a user column of a source.  Only user columns have ids:
 * the analysis stops before using classes when a query reads another kind
 * of column (Analysis.bad_columns), so anything else is a bug.
 */
int
analysis_column_id(Analysis *a, int source, AttrNumber attno)
{
	if (source < 0 || source >= list_length(a->plan->sources) ||
		attno < 1 || attno > SOURCE(a, source)->natts)
		elog(ERROR, "column %d of source %d has no column id", attno, source);
	return a->col_offset[source] + attno - 1;
}

/* The class of a column id: the root of its union-find tree */
static int
class_of(Analysis *a, int id)
{
	while (a->class_parent[id] != id)
		id = a->class_parent[id] = a->class_parent[a->class_parent[id]];
	return id;
}

static void
class_merge(Analysis *a, int id1, int id2)
{
	a->class_parent[class_of(a, id1)] = class_of(a, id2);
}

/*
 * An equality of two columns that a join condition states, and the sides
 * of outer joins (bits of DeltaSource.nulling) that must have found
 * partners for it to hold: those of the outer join in whose ON it is
 * written, and those that null-extend its columns' sources.
 */
typedef struct ColumnEquality
{
	int			id1;
	int			id2;
	Bitmapset  *needs;
} ColumnEquality;

static int	source_of_id(Analysis *a, int id);

static int
find_root(int *parent, int id)
{
	while (parent[id] != id)
		id = parent[id] = parent[parent[id]];
	return id;
}

/*
 * Do two columns hold the same value in every row where both their sources
 * are (not null-extended)?  They do when a chain of equalities ties them
 * whose every link holds in those rows: one written in the ON of an outer
 * join, or reading a source an outer join null-extends, holds only where
 * that join found partners.  The classes (class_of) merge every equality,
 * in whatever rows it holds: "a LEFT JOIN c ON a.k1 = c.x AND a.k2 = c.x"
 * puts a.k1 and a.k2 in one class, but they are equal only in the rows
 * where a has a partner, and a row of a with none -- k1 1, k2 2 -- is not
 * told from another (1, 3) by k1 alone.
 */
static bool
same_value(Analysis *a, int id1, int id2)
{
	Bitmapset  *rows;
	int		   *parent;
	ListCell   *lc;
	bool		result;

	if (id1 == id2)
		return true;
	if (class_of(a, id1) != class_of(a, id2))
		return false;
	rows = bms_union(SOURCE(a, source_of_id(a, id1))->nulling,
					 SOURCE(a, source_of_id(a, id2))->nulling);
	parent = palloc(sizeof(int) * a->ncolumn_ids);
	for (int i = 0; i < a->ncolumn_ids; i++)
		parent[i] = i;
	foreach(lc, a->equalities)
	{
		ColumnEquality *e = lfirst(lc);

		if (bms_is_subset(e->needs, rows))
			parent[find_root(parent, e->id1)] = find_root(parent, e->id2);
	}
	result = (find_root(parent, id1) == find_root(parent, id2));
	pfree(parent);
	bms_free(rows);
	return result;
}

/* The source and column of a plain Var of this query level, or false. */
bool
analysis_var_source(Analysis *a, Node *node, int *source, AttrNumber *attno)
{
	Var		   *var;

	if (!IsA(node, Var))
		return false;
	var = (Var *) node;
	if (var->varlevelsup != 0 || var->varattno <= 0 || a->rt_source[var->varno] < 0)
		return false;
	*source = a->rt_source[var->varno];
	*attno = var->varattno;
	return true;
}

/* The sources (indexes into plan->sources) of a set of range-table indexes */
Bitmapset *
analysis_relids_sources(Analysis *a, Bitmapset *relids)
{
	Bitmapset  *result = NULL;
	int			rtindex = -1;

	while ((rtindex = bms_next_member(relids, rtindex)) >= 0)
		if (a->rt_source[rtindex] >= 0)
			result = bms_add_member(result, a->rt_source[rtindex]);
	return result;
}

/* The sources of the Vars of a node */
Bitmapset *
analysis_node_sources(Analysis *a, Node *node)
{
	return analysis_relids_sources(a, pull_varnos(NULL, node));
}

/* 'table "public.orders" AS o', or 'tables "public.orders" AS o, "public.items" AS i' */
static char *
sources_label(Analysis *a, Bitmapset *sources)
{
	StringInfoData buf;
	int			s = -1;

	if (bms_membership(sources) == BMS_SINGLETON)
		return analysis_source_label(SOURCE(a, bms_singleton_member(sources)));
	initStringInfo(&buf);
	while ((s = bms_next_member(sources, s)) >= 0)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "tables ",
						 analysis_source_name(SOURCE(a, s)));
	return buf.data;
}

/* Strip binary-compatible relabelling, which does not change the value. */
static Node *
strip_relabel(Node *node)
{
	while (node && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return node;
}

/*
 * Do two collations compare alike for equality: the same one, or two that
 * are both deterministic (or none)?
 */
static bool
collations_agree(Oid c1, Oid c2)
{
	if (c1 == c2)
		return true;
	return (!OidIsValid(c1) || get_collation_isdeterministic(c1)) &&
		(!OidIsValid(c2) || get_collation_isdeterministic(c2));
}

/*
 * Does this equality compare a column of a source as the column's own
 * equality does: an operator of its type's default btree operator family,
 * under a collation that tells apart what its own tells apart?  Only then
 * are the columns it equates alike for keys: varchar = char(n) compares as
 * char(n), ignoring trailing blanks, and a nondeterministic collation
 * folds values the column's collation keeps apart, so one row of a side
 * matches several rows of the other's key ('a' and 'a ').
 */
static bool
equality_keeps_column(Analysis *a, int source, AttrNumber attno, Oid opno, Oid collation)
{
	Oid			type;
	int32		typmod;
	Oid			attcollation;
	Oid			opclass;

	get_atttypetypmodcoll(SOURCE(a, source)->relid, attno, &type, &typmod, &attcollation);
	opclass = GetDefaultOpClass(type, BTREE_AM_OID);
	return OidIsValid(opclass) && op_in_opfamily(opno, get_opclass_family(opclass)) &&
		collations_agree(collation, attcollation);
}

/*
 * Reject a join condition one side of which is not a plain column: say
 * how it changes the column, when it only casts it or gives it another
 * collation, which a plain column's own type or collation would avoid.
 */
static void
reject_computed_join(Analysis *a, Node *side, Bitmapset *lsources, Bitmapset *rsources)
{
	List	   *vars = pull_var_clause(side, 0);
	Var		   *var = linitial(vars);
	DeltaSource *src = SOURCE(a, a->rt_source[var->varno]);
	Node	   *inner = NULL;
	const char *how = "is computed";
	const char *hint = "Compare plain columns (store the computed value in a column of the source, with an index on it).";

	side = strip_relabel(side);
	if (IsA(side, FuncExpr) && ((FuncExpr *) side)->args != NIL &&
		(((FuncExpr *) side)->funcformat == COERCE_IMPLICIT_CAST ||
		 ((FuncExpr *) side)->funcformat == COERCE_EXPLICIT_CAST))
		inner = linitial(((FuncExpr *) side)->args);
	else if (IsA(side, CoerceViaIO))
		inner = (Node *) ((CoerceViaIO *) side)->arg;
	else if (IsA(side, CollateExpr))
		inner = (Node *) ((CollateExpr *) side)->arg;
	if (inner != NULL && IsA(strip_relabel(inner), Var))
	{
		if (IsA(side, CollateExpr))
		{
			how = psprintf("is compared under collation %s",
						   generate_collation_name(((CollateExpr *) side)->collOid));
			hint = "Compare the column under its own collation, or give it the collation the join needs (ALTER TABLE ... ALTER COLUMN ... TYPE ... COLLATE ...), with an index on it.";
		}
		else
		{
			how = psprintf("is cast to %s", format_type_be(exprType(side)));
			hint = "Join columns of one type, or of types compared without a cast (integer and bigint); or store the cast value in a column of the source, with an index on it.";
		}
	}
	a->computed_joins = lappend(a->computed_joins, bms_union(lsources, rsources));
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
					psprintf("delta view rule 3: join key %s %s in a join condition between %s and %s",
							 analysis_column_label(src, var->varattno), how,
							 sources_label(a, lsources), sources_label(a, rsources)),
					pstrdup("Join keys must reach the join unchanged, so that a lookup through an index finds the same rows."),
					pstrdup(hint));
}

/*
 * Split the quals into join conditions and filters.  A qual is a join
 * condition when it is a btree equality between plain columns of two
 * different sources; a btree equality between columns of different sources
 * where either side is computed (o.a + 1 = i.a, c.k = b.k + a.k) breaks
 * rule 3.
 */
static void
classify_quals(Analysis *a, List *quals)
{
	ListCell   *lc;

	foreach(lc, quals)
	{
		Node	   *qual = lfirst(lc);
		OpExpr	   *op;
		Node	   *l,
				   *r;
		Bitmapset  *lsources,
				   *rsources;
		int			ls,
					rs;
		AttrNumber	la = InvalidAttrNumber,
					ra = InvalidAttrNumber;
		bool		lplain,
					rplain;

		if (!IsA(qual, OpExpr) || list_length(((OpExpr *) qual)->args) != 2)
		{
			a->filters = lappend(a->filters, qual);
			continue;
		}
		op = (OpExpr *) qual;
		l = linitial(op->args);
		r = lsecond(op->args);
		lsources = analysis_node_sources(a, l);
		rsources = analysis_node_sources(a, r);
		if (bms_is_empty(lsources) || bms_is_empty(rsources) ||
			bms_overlap(lsources, rsources) ||
			!op_mergejoinable(op->opno, exprType(l)))
		{
			/*
			 * An "=" that is not mergejoinable (a type's own operator made
			 * without MERGES) joins nothing: rule 2's error names it, rather
			 * than saying that there is no equality at all.
			 */
			if (!bms_is_empty(lsources) && !bms_is_empty(rsources) &&
				!bms_overlap(lsources, rsources) &&
				IsA(strip_relabel(l), Var) && IsA(strip_relabel(r), Var))
			{
				char	   *opname = get_opname(op->opno);

				if (opname != NULL && strcmp(opname, "=") == 0)
					a->unmergeable_joins = lappend(a->unmergeable_joins, op);
			}
			a->filters = lappend(a->filters, qual);
			continue;
		}

		lplain = analysis_var_source(a, strip_relabel(l), &ls, &la);
		rplain = analysis_var_source(a, strip_relabel(r), &rs, &ra);
		if (lplain && rplain)
		{
			DeltaJoinCond *cond = palloc(sizeof(DeltaJoinCond));

			cond->left = ls;
			cond->left_attno = la;
			cond->right = rs;
			cond->right_attno = ra;
			cond->opno = op->opno;
			cond->collation = op->inputcollid;
			a->plan->conds = lappend(a->plan->conds, cond);
			if (equality_keeps_column(a, ls, la, op->opno, op->inputcollid) &&
				equality_keeps_column(a, rs, ra, op->opno, op->inputcollid))
			{
				ColumnEquality *e = palloc(sizeof(ColumnEquality));

				e->id1 = analysis_column_id(a, ls, la);
				e->id2 = analysis_column_id(a, rs, ra);
				e->needs = bms_union(analysis_tree_qual_sides(a, qual),
									 bms_union(SOURCE(a, ls)->nulling, SOURCE(a, rs)->nulling));
				a->equalities = lappend(a->equalities, e);
				class_merge(a, e->id1, e->id2);
			}
		}
		else
			reject_computed_join(a, lplain ? r : l, lsources, rsources);
	}
}

/* ----------------------------------------------------------------
 *		Rule 2: index prefixes and lookups
 * ----------------------------------------------------------------
 */

/*
 * The index of source src whose leading key columns the most bindable
 * columns cover (primary key on ties), as a lookup; NULL if none covers even
 * the first column.
 */
DeltaLookup *
analysis_choose_lookup(Analysis *a, int source, List *bindable)
{
	List	   *indexes = list_nth(a->source_indexes, source);
	DeltaLookup *best = NULL;
	ListCell   *lc;

	foreach(lc, indexes)
	{
		IndexDesc  *desc = lfirst(lc);
		DeltaLookupKey *keys = palloc(sizeof(DeltaLookupKey) * desc->nkeyatts);
		int			nkeys = 0;

		for (int i = 0; i < desc->nkeyatts; i++)
		{
			ListCell   *lc2;
			bool		bound = false;

			foreach(lc2, bindable)
			{
				BindableColumn *col = lfirst(lc2);
				Oid			member;

				if (col->attno != desc->attnums[i] ||
					!op_in_opfamily(col->opno, desc->opfamilies[i]) ||
					!collations_agree(col->collation, desc->collations[i]))
					continue;
				member = get_opfamily_member(desc->opfamilies[i], desc->opcintypes[i],
											 col->righttype, BTEqualStrategyNumber);
				if (!OidIsValid(member))
					continue;
				keys[nkeys].from_source = col->from_source;
				keys[nkeys].from_attno = col->from_attno;
				keys[nkeys].from_type = col->righttype;
				keys[nkeys].index_attno = i + 1;
				keys[nkeys].proc = get_opcode(member);
				keys[nkeys].collation = desc->collations[i];
				nkeys++;
				bound = true;
				break;
			}
			if (!bound)
				break;
		}

		if (nkeys > 0 &&
			(best == NULL || nkeys > best->nkeys ||
			 (nkeys == best->nkeys && desc->primary)))
		{
			best = palloc(sizeof(DeltaLookup));
			best->source = source;
			best->index = desc->oid;
			best->nkeys = nkeys;
			best->keys = keys;
		}
	}
	return best;
}

/* Columns of `source` that conditions tie to sources in `bound`. */
static List *
bindable_from_conds(Analysis *a, int source, Bitmapset *bound)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, a->plan->conds)
	{
		DeltaJoinCond *cond = lfirst(lc);
		BindableColumn *col;
		Oid			lefttype;

		col = palloc(sizeof(BindableColumn));
		if (cond->left == source && bms_is_member(cond->right, bound))
		{
			col->attno = cond->left_attno;
			col->opno = cond->opno;
			col->from_source = cond->right;
			col->from_attno = cond->right_attno;
		}
		else if (cond->right == source && bms_is_member(cond->left, bound))
		{
			col->attno = cond->right_attno;
			col->opno = get_commutator(cond->opno);
			col->from_source = cond->left;
			col->from_attno = cond->left_attno;
			if (!OidIsValid(col->opno))
				continue;
		}
		else
			continue;
		op_input_types(col->opno, &lefttype, &col->righttype);
		col->collation = cond->collation;
		result = lappend(result, col);
	}
	return result;
}

/*
 * "CREATE INDEX ON orders (merchant_id, item_id);" for a hint.  A column
 * the join compares under a collation its own does not agree with (see
 * collations_agree) is indexed under the join's: "(name COLLATE ci)", the
 * only index a lookup could use.
 */
static char *
create_index_hint(DeltaSource *src, List *bindable)
{
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * Max(list_length(bindable), 1));
	int			n = 0;
	StringInfoData cols;
	ListCell   *lc;

	initStringInfo(&cols);
	foreach(lc, bindable)
	{
		BindableColumn *col = lfirst(lc);
		bool		dup = false;
		Oid			type;
		int32		typmod;
		Oid			own;

		for (int i = 0; i < n; i++)
			dup |= (attnums[i] == col->attno);
		if (dup)
			continue;
		attnums[n++] = col->attno;
		appendStringInfo(&cols, "%s%s", cols.len > 0 ? ", " : "",
						 quote_identifier(get_attname(src->relid, col->attno, false)));
		get_atttypetypmodcoll(src->relid, col->attno, &type, &typmod, &own);
		if (OidIsValid(col->collation) && !collations_agree(col->collation, own))
			appendStringInfo(&cols, " COLLATE %s", generate_collation_name(col->collation));
	}
	return psprintf("Create an index whose leading columns the join binds: CREATE INDEX ON %s (%s);",
					src->relname, cols.data);
}

/* Every partition key column of a partitioned source must be bindable. */
void
analysis_check_partition_key(Analysis *a, int source, List *bindable, const char *what)
{
	DeltaSource *src = SOURCE(a, source);
	AttrNumber *partattrs;
	int			npart;

	if (!src->partitioned)
		return;
	npart = analysis_partition_key(a, src, &partattrs);
	for (int i = 0; i < npart; i++)
	{
		ListCell   *lc;
		bool		found = false;

		foreach(lc, bindable)
			found |= (((BindableColumn *) lfirst(lc))->attno == partattrs[i]);
		if (!found && partattrs[i] != 0)
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 2: %s of partitioned %s does not include partition key column %s",
							what, analysis_source_label(src), analysis_column_label(src, partattrs[i])),
				   pstrdup("A lookup into a partitioned source must name the partition it reads."),
				   psprintf("Add %s to the %s.", analysis_column_label(src, partattrs[i]), what));
	}
}

/*
 * Does a condition between the sources joined join component[t]'s group
 * to another?  Then one source of each side, in *inside and *outside.
 */
static bool
sources_across(Bitmapset *joined, const int *component, int t, int *inside, int *outside)
{
	int			in = -1;
	int			out = -1;
	int			s = -1;

	while ((s = bms_next_member(joined, s)) >= 0)
	{
		if (component[s] == component[t] && in < 0)
			in = s;
		else if (component[s] != component[t] && out < 0)
			out = s;
	}
	if (in < 0 || out < 0)
		return false;
	*inside = in;
	*outside = out;
	return true;
}

/*
 * Rule 2, for every pair of joined sources: each side's equality columns
 * must cover the leading column(s) of a btree index.  All sources must be
 * connected by such pairs.
 */
static void
check_join_edges(Analysis *a)
{
	int			nsources = list_length(a->plan->sources);
	int		   *component = palloc(sizeof(int) * nsources);
	ListCell   *lc;

	for (int i = 0; i < nsources; i++)
		component[i] = i;

	for (int s = 0; s < nsources; s++)
	{
		for (int t = 0; t < nsources; t++)
		{
			List	   *bindable;
			DeltaLookup *lookup;
			DeltaSource *src = SOURCE(a, t);

			if (s == t)
				continue;
			bindable = bindable_from_conds(a, t, bms_make_singleton(s));
			if (bindable == NIL)
				continue;

			/* s and t are joined: merge their components */
			{
				int			from = component[t],
							to = component[s];

				for (int i = 0; i < nsources; i++)
					if (component[i] == from)
						component[i] = to;
			}

			/*
			 * The partition key first: no index can make up for its absence,
			 * so the hint of a missing index alone would lead nowhere.
			 */
			analysis_check_partition_key(a, t, bindable, "join key");
			lookup = analysis_choose_lookup(a, t, bindable);
			if (lookup == NULL)
			{
				StringInfoData cols;

				initStringInfo(&cols);
				foreach(lc, bindable)
					appendStringInfo(&cols, "%s%s", cols.len > 0 ? ", " : "",
									 analysis_column_label(src, ((BindableColumn *) lfirst(lc))->attno));
				analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("delta view rule 2: join key (%s) of %s does not cover the leading column of any btree index",
								cols.data, analysis_source_label(src)),
					   psprintf("When %s changes, the matching rows of %s are looked up through an index whose leading columns the join binds.",
								analysis_source_label(SOURCE(a, s)), analysis_source_label(src)),
					   create_index_hint(src, bindable));
				continue;
			}
			if (!OidIsValid(src->lookup_index))
			{
				src->lookup_index = lookup->index;
				src->lookup_nkeys = lookup->nkeys;
			}
		}
	}

	/*
	 * One error per group of sources not joined to the first: naming a
	 * source of the group that a computed equality (rule 3) meant to join
	 * to another group, and that one, when there is such an equality ("c.k2
	 * = b.k2 + 1": c is not joined to b); else the group's first source and
	 * the first source.
	 */
	for (int t = 1; t < nsources; t++)
	{
		int			member = t;
		int			other = 0;
		bool		first_of_group = true;
		OpExpr	   *unmergeable = NULL;

		if (component[t] == component[0])
			continue;
		for (int u = 1; u < t; u++)
			first_of_group &= (component[u] != component[t]);
		if (!first_of_group)
			continue;
		foreach(lc, a->computed_joins)
		{
			if (sources_across(lfirst(lc), component, t, &member, &other))
				break;
		}
		foreach(lc, a->unmergeable_joins)
		{
			OpExpr	   *op = lfirst(lc);

			if (sources_across(bms_union(analysis_node_sources(a, linitial(op->args)),
										 analysis_node_sources(a, lsecond(op->args))),
							   component, t, &member, &other))
			{
				unmergeable = op;
				break;
			}
		}
		if (unmergeable != NULL)
		{
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 2: %s is joined to %s by operator %s, which is not mergejoinable",
							analysis_source_label(SOURCE(a, member)), analysis_source_label(SOURCE(a, other)),
							format_operator(unmergeable->opno)),
				   pstrdup("A join condition is an equality the planner can merge join: an operator made with MERGES that a btree operator family of its type holds, so that an index lookup finds the rows it matches."),
				   pstrdup("Create the operator with MERGES (CREATE OPERATOR ... MERGES), in a btree operator class of its type, or join by columns of another type."));
			continue;
		}
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 2: %s is not joined to %s by an equality of columns",
						analysis_source_label(SOURCE(a, member)), analysis_source_label(SOURCE(a, other))),
			   pstrdup("Every join needs at least one equality condition between plain columns of its two sides."),
			   pstrdup("Add an equality condition on indexed columns."));
	}
}

/* Plan, for each source, the order and indexes of lookups on its change. */
static void
plan_walks(Analysis *a)
{
	int			nsources = list_length(a->plan->sources);

	for (int driver = 0; driver < nsources; driver++)
	{
		DeltaWalk  *walk;
		Bitmapset  *bound = bms_make_singleton(driver);

		/* a lookup-only source drives nothing */
		if (SOURCE(a, driver)->lookup_only)
			continue;
		walk = palloc0(sizeof(DeltaWalk));
		walk->driver = driver;
		while (bms_num_members(bound) < nsources)
		{
			DeltaLookup *best = NULL;

			for (int t = 0; t < nsources; t++)
			{
				DeltaLookup *lookup;

				if (bms_is_member(t, bound))
					continue;
				lookup = analysis_choose_lookup(a, t, bindable_from_conds(a, t, bound));
				if (lookup && (best == NULL || lookup->nkeys > best->nkeys))
					best = lookup;
			}
			if (best == NULL)
				elog(ERROR, "no lookup order for a join that passed rule 2");
			walk->lookups = lappend(walk->lookups, best);
			bound = bms_add_member(bound, best->source);
		}
		a->plan->walks = lappend(a->plan->walks, walk);
	}
	if (a->plan->walks == NIL)
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 2: every source is lookup-only"),
			   pstrdup("A lookup-only source's changes trigger nothing, so the view would never change."),
			   pstrdup("Remove the lookup_only hint from the table whose changes should drive the view."));
}

/* ----------------------------------------------------------------
 *		Rules 6 and 8: the result's unique key
 * ----------------------------------------------------------------
 */

/*
 * Output column (0-based) that is a plain Var equal to column id `id`
 * (same_value) and of a source null-extended exactly when `source` is, or
 * -1: in the rows where `source` is null-extended, it must be NULL too.
 * With source -1, of any source.  With a valid type, only a column of a
 * type that one is binary-coercible to (or of a domain over such a type).
 */
static int
output_equal_to(Analysis *a, int id, int source, Oid type)
{
	int			i = 0;
	ListCell   *lc;

	foreach(lc, a->plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		int			s;
		AttrNumber	att;

		if (tle->resjunk)
			continue;
		if (analysis_var_source(a, (Node *) tle->expr, &s, &att) &&
			(source < 0 || bms_equal(SOURCE(a, s)->nulling, SOURCE(a, source)->nulling)) &&
			same_value(a, id, analysis_column_id(a, s, att)) &&
			(!OidIsValid(type) ||
			 IsBinaryCoercible(type, getBaseType(exprType((Node *) tle->expr)))))
			return i;
		i++;
	}
	return -1;
}

/* The source a column id belongs to */
static int
source_of_id(Analysis *a, int id)
{
	for (int s = list_length(a->plan->sources) - 1; s >= 0; s--)
	{
		if (id >= a->col_offset[s])
			return s;
	}
	elog(ERROR, "column id %d belongs to no source", id);
	return -1;					/* keep compiler quiet */
}

static int
compare_int(const void *a, const void *b)
{
	return *(const int *) a - *(const int *) b;
}

/*
 * Set the plan's key columns from key column ids (classes); analysis_reject (rule 8)
 * when one is not in the select list.
 */
void
analysis_map_key(Analysis *a, List *key_ids)
{
	DeltaPlan  *plan = a->plan;
	StringInfoData missing;
	ListCell   *lc;
	int			n = 0;

	initStringInfo(&missing);
	plan->key_columns = palloc(sizeof(int) * Max(list_length(key_ids), 1));
	foreach(lc, key_ids)
	{
		int			id = lfirst_int(lc);
		int			s = source_of_id(a, id);
		int			col = output_equal_to(a, id, s, InvalidOid);
		bool		dup = false;

		if (col < 0)
		{
			appendStringInfo(&missing, "%s%s", missing.len > 0 ? ", " : "",
							 analysis_column_label(SOURCE(a, s), id - a->col_offset[s] + 1));
			continue;
		}
		for (int i = 0; i < n; i++)
			dup |= (plan->key_columns[i] == col);
		if (!dup)
			plan->key_columns[n++] = col;
	}
	plan->key_ncolumns = n;
	qsort(plan->key_columns, n, sizeof(int), compare_int);

	if (missing.len > 0)
		analysis_reject(a, ERRCODE_INVALID_OBJECT_DEFINITION,
			   psprintf("delta view rule 8: the select list lacks %s, part of the result's unique key",
						missing.data),
			   pstrdup("The target's primary key is the result's unique key, so the query must output it."),
			   psprintf("Add %s to the select list.", missing.data));
}

/*
 * The result's unique key of a join: the primary keys of all sources, less
 * those of sources whose whole primary key the join ties to columns of the
 * sources that remain (their row follows from those).
 */
static void
derive_join_key(Analysis *a)
{
	int			nsources = list_length(a->plan->sources);
	bool	   *in_key = palloc(sizeof(bool) * nsources);
	int			remaining = nsources;
	List	   *key_ids = NIL;

	for (int s = 0; s < nsources; s++)
		in_key[s] = true;

	/*
	 * A source's key can be left out when the join ties each of its columns
	 * to a column of a source that stays in the key and is in every row
	 * this one is in (not null-extended where it is not): its row follows
	 * from that source's.
	 */
	for (int s = nsources - 1; s >= 0 && remaining > 1; s--)
	{
		DeltaSource *src = SOURCE(a, s);
		bool		covered = true;

		for (int k = 0; k < src->pk_natts && covered; k++)
		{
			int			id = analysis_column_id(a, s, src->pk_attnums[k]);
			bool		found = false;

			for (int t = 0; t < nsources && !found; t++)
			{
				DeltaSource *other = SOURCE(a, t);
				int			natts = other->natts;

				if (t == s || !in_key[t] || !bms_is_subset(other->nulling, src->nulling))
					continue;
				for (AttrNumber att = 1; att <= natts && !found; att++)
					found = same_value(a, id, analysis_column_id(a, t, att));
			}
			covered = found;
		}
		if (covered)
		{
			in_key[s] = false;
			remaining--;
		}
	}

	for (int s = 0; s < nsources; s++)
	{
		DeltaSource *src = SOURCE(a, s);

		if (!in_key[s])
			continue;
		a->key_sources = bms_add_member(a->key_sources, s);
		a->plan->key_sources = bms_add_member(a->plan->key_sources, s);
		for (int k = 0; k < src->pk_natts; k++)
			key_ids = lappend_int(key_ids, analysis_column_id(a, s, src->pk_attnums[k]));
	}
	analysis_map_key(a, key_ids);
}

/*
 * The output column that holds key column k of source s (of a type the
 * key's is binary-coercible to), or -1: the column itself when the select
 * list has it, else one equal to it (same_value) that no earlier key
 * column of s took, else one that one did.  Two key columns in one output
 * column would make a key whose values differ (a changed row that joins
 * nothing: k1 11, k2 6 where the join ties both to one column) look for
 * the target's rows by the last value alone (c1 = 6), and take another
 * row's for its own.
 */
static int
key_output_column(Analysis *a, int s, int k, Oid type)
{
	DeltaSource *src = SOURCE(a, s);
	int			id = analysis_column_id(a, s, src->key_attnums[k]);
	int			i = 0;
	int			shared = -1;
	ListCell   *lc;

	foreach(lc, a->plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		int			ts;
		AttrNumber	att;

		if (tle->resjunk)
			continue;
		if (analysis_var_source(a, (Node *) tle->expr, &ts, &att) && ts == s &&
			att == src->key_attnums[k] &&
			IsBinaryCoercible(type, getBaseType(exprType((Node *) tle->expr))))
			return i;
		i++;
	}
	i = 0;
	foreach(lc, a->plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		int			ts;
		AttrNumber	att;
		bool		taken = false;

		if (tle->resjunk)
			continue;
		if (analysis_var_source(a, (Node *) tle->expr, &ts, &att) &&
			bms_equal(SOURCE(a, ts)->nulling, src->nulling) &&
			same_value(a, id, analysis_column_id(a, ts, att)) &&
			IsBinaryCoercible(type, getBaseType(exprType((Node *) tle->expr))))
		{
			for (int j = 0; j < k; j++)
				taken |= (src->key_output[j] == i);
			if (!taken)
				return i;
			if (shared < 0)
				shared = i;
		}
		i++;
	}
	return shared;
}

/* Does key column k of src have an output column of its own? */
static bool
key_column_distinct(DeltaSource *src, int k)
{
	for (int j = 0; j < k; j++)
		if (src->key_output[j] == src->key_output[k])
			return false;
	return true;
}

/*
 * Where each source's key columns are in the output (DeltaSource.
 * key_output).  A view that finds its rows in the target by a source's key
 * needs them there: in retract mode every source that drives changes (the
 * rows it was part of are replaced), with outer joins every anchor (the
 * slices of the result are found by them).
 */
static void
map_source_keys(Analysis *a)
{
	DeltaPlan  *plan = a->plan;
	ListCell   *lc;

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		int			s = foreach_current_index(lc);
		StringInfoData missing;
		bool		needed;
		bool		any_partner = false;
		bool		mistyped = false;
		bool		partner_mistyped = false;
		bool		shared = false;

		initStringInfo(&missing);
		src->key_output = palloc(sizeof(int) * Max(src->key_natts, 1));
		src->partner_output = palloc(sizeof(int) * Max(src->key_natts, 1));
		src->key_in_output = true;
		for (int k = 0; k < src->key_natts; k++)
		{
			int			id = analysis_column_id(a, s, src->key_attnums[k]);
			Oid			type = get_atttype(src->relid, src->key_attnums[k]);

			/*
			 * (Apply finds target rows by the key's values as the source
			 * has them: not in a column of another type that the join
			 * equates with it, an int4 beside an int8 key.)
			 */
			src->key_output[k] = key_output_column(a, s, k, type);
			if (src->key_output[k] >= 0 && !key_column_distinct(src, k))
			{
				shared = true;
				appendStringInfo(&missing, "%s%s", missing.len > 0 ? ", " : "",
								 analysis_column_label(src, src->key_attnums[k]));
			}
			src->partner_output[k] = src->key_output[k] >= 0 ? src->key_output[k] :
				output_equal_to(a, id, -1, type);
			any_partner |= (src->partner_output[k] >= 0);
			partner_mistyped |= (src->partner_output[k] < 0 &&
								 output_equal_to(a, id, -1, InvalidOid) >= 0);
			if (src->key_output[k] < 0)
			{
				mistyped |= (output_equal_to(a, id, s, InvalidOid) >= 0);
				src->key_in_output = false;
				appendStringInfo(&missing, "%s%s", missing.len > 0 ? ", " : "",
								 analysis_column_label(src, src->key_attnums[k]));
			}
		}

		/*
		 * (The key sources' own columns are reported by analysis_map_key,
		 * when none is in the output.)
		 */
		needed = ((plan->options.retract && !src->lookup_only) ||
				  list_member_int(plan->anchors, s)) &&
			(!bms_is_member(s, a->key_sources) || mistyped);
		if (needed && (!src->key_in_output || shared))
			analysis_reject(a, ERRCODE_INVALID_OBJECT_DEFINITION,
							psprintf("delta view rule 8: the select list lacks %s, the key of %s",
									 missing.data, analysis_source_label(src)),
							mistyped ?
							pstrdup("It has the key's value only in a column of another type, which the target's rows cannot be found by with the key's values.") :
							plan->options.retract ?
							pstrdup("In retract mode each target row carries the key of every source row it came from, to be replaced when that row changes.") :
							pstrdup("With outer joins the rows of the result are told apart by the keys of the sources that are in them."),
							psprintf("Add %s to the select list.", missing.data));

		/*
		 * Upsert mode: when a row of a source outer joins can null-extend
		 * goes, the rows it was joined in are found in the target by the
		 * output columns equal to its key, to get their null-extended row
		 * back.
		 */
		if (!plan->options.retract && !bms_is_empty(src->nulling) && !src->lookup_only &&
			src->key_natts > 0 && !any_partner)
			analysis_reject(a, ERRCODE_INVALID_OBJECT_DEFINITION,
							psprintf(partner_mistyped ?
									 "delta view rule 8: the select list holds columns equal to a key column of %s, which an outer join can null-extend, only of other types" :
									 "delta view rule 8: the select list holds no column equal to a key column of %s, which an outer join can null-extend",
									 analysis_source_label(src)),
							pstrdup("When its row goes, the rows it was joined in are found in the target by such a column, and get their null-extended row back."),
							partner_mistyped ?
							psprintf("Add %s to the select list (the key's values cannot find rows by a column of another type); or use retract mode.",
									 analysis_column_label(src, src->key_attnums[0])) :
							psprintf("Add %s, or the column of the preserved side the join equates with it, to the select list; or use retract mode.",
									 analysis_column_label(src, src->key_attnums[0])));
	}
}

/* Refuse a filter on a column outside the result's key (rule 6) */
static void
reject_filter(Analysis *a, const char *column, const char *clause)
{
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("delta view rule 6: %s condition on %s, which is not part of the result's unique key, could leave an earlier result row behind",
					clause, column),
		   pstrdup("A delta view writes only upserts: when a row stops passing the filter, the row written for it earlier stays in the target."),
		   pstrdup("Make the view exact with options => '{\"retract\": true}', under which a row that stops passing is deleted; "
				   "or select the condition as a logical-delete column instead, e.g. CASE WHEN <condition> THEN 0 ELSE 1 END AS is_delete; "
				   "or accept residual rows with options => '{\"ignore_non_unique_key_filter\": true}'."));
}

/* Rule 6 for the WHERE/ON filters of a join view. */
static void
check_join_filters(Analysis *a)
{
	ListCell   *lc;

	/* in retract mode nothing is left behind */
	if (a->plan->options.retract)
		return;

	foreach(lc, a->filters)
	{
		List	   *vars = pull_var_clause(lfirst(lc), 0);
		const char *clause = analysis_tree_on_qual(a, lfirst(lc)) ? "ON" : "WHERE";
		ListCell   *lc2;

		foreach(lc2, vars)
		{
			Var		   *var = lfirst(lc2);
			int			s = a->rt_source[var->varno];
			int			col = output_equal_to(a, analysis_column_id(a, s, var->varattno), s,
											  InvalidOid);
			bool		in_key = false;

			for (int k = 0; k < a->plan->key_ncolumns; k++)
				in_key |= (a->plan->key_columns[k] == col);
			if (col < 0 || !in_key)
			{
				a->plan->has_filter = true;
				if (!a->plan->options.ignore_non_unique_key_filter)
					reject_filter(a, analysis_column_label(SOURCE(a, s), var->varattno), clause);
				return;
			}
		}
	}
}


/*
 * In retract mode, and with outer joins, a decoded DELETE must name the
 * deleted row's key: the rows it was in are found by it.  The default
 * replica identity logs the primary key; NOTHING, or an index without the
 * key, does not.
 */
static void
check_old_keys_logged(Analysis *a)
{
	ListCell   *lc;

	foreach(lc, a->plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		Oid			culprit;

		if (src->lookup_only)
			continue;
		for (int k = 0; k < src->key_natts; k++)
		{
			if (analysis_logged_in_old_row(src, src->key_attnums[k], &culprit))
				continue;
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 1: the replica identity of %s does not log key column %s of deleted rows",
							quote_qualified_identifier(get_namespace_name(get_rel_namespace(culprit)),
													   get_rel_name(culprit)),
							analysis_column_label(src, src->key_attnums[k])),
				   pstrdup("In retract mode and with outer joins, the rows a deleted source row was in are found by its key, which a decoded DELETE carries only in its replica identity."),
				   psprintf("Log the primary key again: ALTER TABLE %s REPLICA IDENTITY DEFAULT;",
							quote_qualified_identifier(get_namespace_name(get_rel_namespace(culprit)),
													   get_rel_name(culprit))));
			break;
		}
	}
}

/*
 * A delta join computes its rows from the rows decoding gives and lookups
 * fetch, which hold NULL for a virtual generated column: refuse each one
 * the query reads, once (a join's alias stands for the columns it joins).
 */
typedef struct VirtualColumns
{
	Analysis   *a;
	Bitmapset  *refused;		/* column ids */
} VirtualColumns;

static bool
virtual_columns_walker(Node *node, VirtualColumns *vc)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;
		int			s;
		AttrNumber	att;

		if (analysis_var_source(vc->a, node, &s, &att))
		{
			int			id = analysis_column_id(vc->a, s, att);

			if (!bms_is_member(id, vc->refused) &&
				analysis_refuse_virtual(vc->a, list_nth(vc->a->plan->sources, s), att,
										"delta view rule 1"))
				vc->refused = bms_add_member(vc->refused, id);
		}
		else if (var->varlevelsup == 0 && var->varattno > 0)
		{
			RangeTblEntry *rte = rt_fetch(var->varno, vc->a->plan->query->rtable);

			if (rte->rtekind == RTE_JOIN && rte->joinaliasvars != NIL)
				return virtual_columns_walker(list_nth(rte->joinaliasvars, var->varattno - 1), vc);
		}
		return false;
	}
	return expression_tree_walker(node, virtual_columns_walker, vc);
}

/*
 * Analyze the join of a join view (plan->quals collected): conditions,
 * lookups for every pair of joined sources (rule 2), the walk of each
 * source, the result's key (rule 8) and its filters (rule 6).
 */
void
analysis_join(Analysis *a)
{
	DeltaPlan  *plan = a->plan;
	ListCell   *lc;

	if (a->path == DJ_PATH_DELTA)
	{
		VirtualColumns vc = {a, NULL};

		(void) query_tree_walker(plan->query, virtual_columns_walker, &vc,
								 QTW_IGNORE_RANGE_TABLE);
	}
	classify_quals(a, plan->quals);
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		src->key_natts = src->pk_natts;
		src->key_attnums = src->pk_attnums;
	}
	/* (keyed recompute lets the planner find the rows its own way) */
	if (a->path == DJ_PATH_KEYED)
		plan->walks = NIL;
	else if (list_length(plan->sources) > 1)
	{
		check_join_edges(a);
		if (a->failures != NIL)
			return;
		plan_walks(a);
	}
	else
		plan->walks = list_make1(palloc0(sizeof(DeltaWalk)));

	derive_join_key(a);
	if (plan->has_outer)
		analysis_tree_anchors(a);
	map_source_keys(a);
	check_join_filters(a);
	if (plan->options.retract || plan->has_outer)
		check_old_keys_logged(a);
}
