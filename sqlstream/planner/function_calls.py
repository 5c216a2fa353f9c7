"""Translate sqlglot function nodes into registry calls.

sqlglot parses many functions into dedicated node classes whose argument
slots do not follow the SQL argument order (TIMESTAMPDIFF, POSITION, ...),
so each needs an explicit translation to (registry name, arguments in the
order the registered kernel takes them).

Keyword arguments (the unit in EXTRACT(HOUR FROM ts), FLOOR(ts TO DAY),
TIMESTAMPDIFF(SECOND, a, b)) are returned as string literals, which the
binder binds as constants like any other.

Nodes are those of planner.dialect.Flink, which the binder parses with; it
rewrites DATE_FORMAT, TIMESTAMPADD, TIMESTAMPDIFF and TO_TIMESTAMP_LTZ into
sqlglot classes of its own choosing, translated back here.
"""

from __future__ import annotations

from sqlglot import exp

from sqlstream.core.sql.dialect import FLINK_TIME_MAPPING

Translation = tuple[str, list[exp.Expression]]

# dedicated sqlglot classes that map 1:1, arguments in the node's own order
_SIMPLE: dict[type[exp.Func], tuple[str, tuple[str, ...]]] = {
    exp.Replace: ("REPLACE", ("this", "expression", "replacement")),
    exp.Repeat: ("REPEAT", ("this", "times")),
    exp.Reverse: ("REVERSE", ("this",)),
    exp.Left: ("LEFT", ("this", "expression")),
    exp.Right: ("RIGHT", ("this", "expression")),
    exp.Ascii: ("ASCII", ("this",)),
    exp.MD5: ("MD5", ("this",)),
    exp.SHA: ("SHA1", ("this",)),
    exp.SHA2: ("SHA2", ("this", "length")),
    exp.RegexpLike: ("REGEXP", ("this", "expression")),
    exp.RegexpReplace: ("REGEXP_REPLACE", ("this", "expression", "replacement")),
    exp.Abs: ("ABS", ("this",)),
    exp.Rand: ("RAND", ("this",)),
    exp.Uuid: ("UUID", ()),
    exp.Sign: ("SIGN", ("this",)),
    exp.Round: ("ROUND", ("this", "decimals")),
    exp.Trunc: ("TRUNCATE", ("this", "decimals")),
    exp.Pow: ("POWER", ("this", "expression")),
    exp.Sqrt: ("SQRT", ("this",)),
    exp.Exp: ("EXP", ("this",)),
    exp.Ln: ("LN", ("this",)),
    exp.Sin: ("SIN", ("this",)),
    exp.Cos: ("COS", ("this",)),
    exp.Tan: ("TAN", ("this",)),
    exp.Cot: ("COT", ("this",)),
    exp.Asin: ("ASIN", ("this",)),
    exp.Acos: ("ACOS", ("this",)),
    exp.Atan: ("ATAN", ("this",)),
    exp.Atan2: ("ATAN2", ("this", "expression")),
    exp.Sinh: ("SINH", ("this",)),
    exp.Cosh: ("COSH", ("this",)),
    exp.Tanh: ("TANH", ("this",)),
    exp.Degrees: ("DEGREES", ("this",)),
    exp.Radians: ("RADIANS", ("this",)),
    exp.Pi: ("PI", ()),
    exp.If: ("IF", ("this", "true", "false")),
    exp.Nullif: ("NULLIF", ("this", "expression")),
    exp.Year: ("YEAR", ("this",)),
    exp.Quarter: ("QUARTER", ("this",)),
    exp.Month: ("MONTH", ("this",)),
    exp.Week: ("WEEK", ("this",)),
    exp.DayOfYear: ("DAYOFYEAR", ("this",)),
    exp.DayOfMonth: ("DAYOFMONTH", ("this",)),
    exp.DayOfWeek: ("DAYOFWEEK", ("this",)),
    exp.Hour: ("HOUR", ("this",)),
    exp.Minute: ("MINUTE", ("this",)),
    exp.Second: ("SECOND", ("this",)),
    exp.CurrentTimestamp: ("CURRENT_TIMESTAMP", ()),
    exp.Localtimestamp: ("LOCALTIMESTAMP", ()),
    exp.CurrentDate: ("CURRENT_DATE", ()),
    exp.CurrentTime: ("CURRENT_TIME", ()),
    exp.Localtime: ("LOCALTIME", ()),
    exp.Overlay: ("OVERLAY", ("this", "expression", "from_", "for_")),
    exp.StartsWith: ("STARTSWITH", ("this", "expression")),
    exp.EndsWith: ("ENDSWITH", ("this", "expression")),
    exp.RegexpCount: ("REGEXP_COUNT", ("this", "expression")),
    exp.RegexpSubstr: ("REGEXP_SUBSTR", ("this", "expression")),
    exp.RegexpInstr: ("REGEXP_INSTR", ("this", "expression")),
    exp.Translate: ("TRANSLATE", ("this", "from_", "to")),
    exp.ToBase64: ("TO_BASE64", ("this",)),
    exp.FromBase64: ("FROM_BASE64", ("this",)),
    exp.Hex: ("HEX", ("this",)),
    exp.Unhex: ("UNHEX", ("this",)),
    exp.ParseUrl: ("PARSE_URL", ("this", "part_to_extract", "key")),
    exp.ArrayContains: ("ARRAY_CONTAINS", ("this", "expression")),
    exp.ArrayDistinct: ("ARRAY_DISTINCT", ("this",)),
    exp.MapKeys: ("MAP_KEYS", ("this",)),
    exp.Split: ("SPLIT", ("this", "expression")),
    exp.ArrayToString: ("ARRAY_JOIN", ("this", "expression", "null")),
    exp.ArrayReverse: ("ARRAY_REVERSE", ("this",)),
    exp.ArrayPosition: ("ARRAY_POSITION", ("this", "expression")),
    exp.ArrayRemove: ("ARRAY_REMOVE", ("this", "expression")),
    exp.ArrayAppend: ("ARRAY_APPEND", ("this", "expression")),
    exp.ArrayPrepend: ("ARRAY_PREPEND", ("this", "expression")),
    exp.ArrayMax: ("ARRAY_MAX", ("this",)),
    exp.ArrayMin: ("ARRAY_MIN", ("this",)),
    exp.ArraySlice: ("ARRAY_SLICE", ("this", "start", "end")),
    exp.ArraySort: ("ARRAY_SORT", ("this", "expression", "asc")),
    exp.ArrayExcept: ("ARRAY_EXCEPT", ("this", "expression")),
    exp.StrToMap: ("STR_TO_MAP", ("this", "pair_delim", "key_value_delim")),
    exp.RegexpExtractAll: ("REGEXP_EXTRACT_ALL", ("this", "expression", "group")),
}

# sqlglot fills these slots itself; they carry nothing the user wrote
_IMPLICIT_ARGS = {"safe", "coalesce", "ignore_nulls", "charset", "check_null", "ensure_variant", "null_propagation"}

_JAVA_LETTERS = {code: letters for letters, code in FLINK_TIME_MAPPING.items()}
_STRFTIME_CODES = sorted(_JAVA_LETTERS, key=len, reverse=True)  # '%-m' before '%m'

_TRIM_BY_POSITION = {None: "TRIM", "BOTH": "TRIM", "LEADING": "LTRIM", "TRAILING": "RTRIM"}
_SUB_DAY_UNITS = {"MILLISECOND", "SECOND", "MINUTE", "HOUR"}


def _keyword(node: exp.Expression) -> exp.Literal:
    """A unit keyword (parsed as a column, variable or identifier) as a string literal."""
    if isinstance(node, exp.Literal) and node.is_string:
        return node
    return exp.Literal.string(node.name.upper().removeprefix("SQL_TSI_"))


def _unused_slots(node: exp.Func, used: tuple[str, ...]) -> bool:
    """Whether the node has arguments this translation would silently drop."""
    return any(
        v is not None and k not in used and k not in _IMPLICIT_ARGS for k, v in node.args.items()
    )


def _args(node: exp.Func, slots: tuple[str, ...]) -> list[exp.Expression]:
    return [node.args[s] for s in slots if node.args.get(s) is not None]


def _java_pattern(strftime: str) -> str:
    """The Java date pattern the Flink dialect turned into ``strftime`` for DATE_FORMAT.

    The dialect maps pattern letters to strftime codes everywhere in the text,
    quoted literals included ('at' becomes '%pt'), so mapping every code back
    restores the pattern exactly; letters it has no code for ('SSS') are unchanged.
    """
    out: list[str] = []
    i = 0
    while i < len(strftime):
        code = next((c for c in _STRFTIME_CODES if strftime.startswith(c, i)), None)
        if code is None:
            out.append(strftime[i])
            i += 1
        else:
            out.append(_JAVA_LETTERS[code])
            i += len(code)
    return "".join(out)


def translate_call(node: exp.Func) -> Translation | None:
    """(registry name, SQL argument nodes) for a function node, or None if unknown."""
    if isinstance(node, exp.Anonymous):
        return node.name.upper(), list(node.expressions)
    if isinstance(node, exp.Substring):
        args = [node.this, node.args.get("start")]
        if node.args.get("length") is not None:
            args.append(node.args["length"])
        return "SUBSTRING", [a for a in args if a is not None]
    if isinstance(node, exp.Length):
        return "CHAR_LENGTH", [node.this]
    if isinstance(node, exp.Coalesce):  # also IFNULL
        return "COALESCE", [node.this, *node.expressions]
    if isinstance(node, exp.ConcatWs):  # a subclass of exp.Concat
        return "CONCAT_WS", list(node.expressions)
    if isinstance(node, exp.Concat):
        return "CONCAT", list(node.expressions)
    if isinstance(node, exp.ArrayConcat):
        return "ARRAY_CONCAT", [node.this, *node.expressions]
    if isinstance(node, exp.ArrayIntersect):
        return "ARRAY_INTERSECT", list(node.expressions)
    if isinstance(node, exp.Upper | exp.Lower):
        return node.sql_name(), [node.this]
    simple = _SIMPLE.get(type(node))
    if simple is not None:
        name, slots = simple
        return None if _unused_slots(node, slots) else (name, _args(node, slots))
    return _special(node)


def _special(node: exp.Func) -> Translation | None:
    """Nodes whose slots need reordering, keyword conversion or a choice of function."""
    if isinstance(node, exp.Trim):
        name = _TRIM_BY_POSITION.get(node.args.get("position"))
        if name is None or _unused_slots(node, ("this", "expression", "position")):
            return None
        return name, _args(node, ("this", "expression"))
    if isinstance(node, exp.StrPosition):
        # POSITION(sub IN s) and LOCATE(sub, s[, from]): the kernel takes (sub, s, from)
        if _unused_slots(node, ("this", "substr", "position")):
            return None
        return "POSITION", _args(node, ("substr", "this", "position"))
    if isinstance(node, exp.Initcap):
        # sqlglot adds its default word delimiters as 'expression'; Flink has no such argument
        return "INITCAP", [node.this]
    if isinstance(node, exp.Pad):
        name = "LPAD" if node.args.get("is_left") else "RPAD"
        return name, _args(node, ("this", "expression", "fill_pattern"))
    if isinstance(node, exp.Elt):
        return "ELT", [node.this, *node.expressions]
    if isinstance(node, exp.Chr):
        return "CHR", list(node.expressions)
    if isinstance(node, exp.RegexpExtract):
        # the default dialect reads the third argument as a 'position'; in Flink it is the group
        if _unused_slots(node, ("this", "expression", "position")):
            return None
        return "REGEXP_EXTRACT", _args(node, ("this", "expression", "position"))
    if isinstance(node, exp.Log):
        # LOG(x) is parsed with x in 'this'; LOG(b, x), LOG10(x), LOG2(x) with the base there
        if node.args.get("expression") is None:
            return "LN", [node.this]
        return "LOG", [node.this, node.expression]
    if isinstance(node, exp.Floor | exp.Ceil):
        base = "FLOOR" if isinstance(node, exp.Floor) else "CEIL"
        if node.args.get("to") is not None:
            return f"{base}_TO", [node.this, _keyword(node.args["to"])]
        return None if _unused_slots(node, ("this",)) else (base, [node.this])
    if isinstance(node, exp.Greatest | exp.Least):
        return ("GREATEST" if isinstance(node, exp.Greatest) else "LEAST"), [
            node.this,
            *node.expressions,
        ]
    if isinstance(node, exp.Extract):
        return "EXTRACT", [_keyword(node.this), node.expression]
    # The Flink dialect parses TIMESTAMPADD(unit, n, ts) as TimestampAdd(this=ts,
    # expression=n, unit) and TIMESTAMPDIFF(unit, a, b) as TimestampDiff(this=b,
    # expression=a, unit); the kernels take (unit, n, ts) and (unit, a, b).
    if isinstance(node, exp.TimestampAdd):
        unit = _keyword(node.args["unit"])
        name = "TIMESTAMPADD_TIME" if unit.name in _SUB_DAY_UNITS else "TIMESTAMPADD"
        return name, [unit, node.expression, node.this]
    if isinstance(node, exp.TimestampDiff):
        return "TIMESTAMPDIFF", [_keyword(node.args["unit"]), node.expression, node.this]
    if isinstance(node, exp.TimeToStr):
        # DATE_FORMAT(ts, 'java pattern'), its pattern turned into strftime by the dialect
        if _unused_slots(node, ("this", "format")):
            return None
        return "DATE_FORMAT", [
            node.this,
            exp.Literal.string(_java_pattern(node.args["format"].name)),
        ]
    if isinstance(node, exp.UnixToTime):
        # TO_TIMESTAMP_LTZ(epoch, precision), as the Flink dialect parses it
        target = node.args.get("target_type")
        if (
            target is None
            or not target.is_type("timestampltz")
            or _unused_slots(node, ("this", "scale", "target_type"))
        ):
            return None
        return "TO_TIMESTAMP_LTZ", [node.this, node.args["scale"]]
    return None
