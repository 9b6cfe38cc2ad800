"""Dataset file formats and column mappings (pure Python; no DB, no web).

A dataset has up to three files, one per *target* of a coverage probe: ``items``, ``users`` and
``interactions``. Each file is either MovieLens ``::``-delimited ``.dat`` or CSV/TSV with a header row.
A :class:`ColumnMapping` says which columns make up a record's line (in order) and which column plays
which *role* (the item id, the user id, the interaction timestamp).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

Target = Literal["items", "users", "interactions"]
FileFormat = Literal["movielens", "csv", "tsv"]
Role = Literal["item_id", "user_id", "timestamp"]

TARGETS: tuple[Target, ...] = get_args(Target)
FORMATS: tuple[FileFormat, ...] = get_args(FileFormat)
ROLES: tuple[Role, ...] = get_args(Role)

DELIMITERS: dict[FileFormat, str] = {"movielens": "::", "csv": ",", "tsv": "\t"}

# The roles a file of each target must map; the first one is the record's key, and its column must
# come first in the line so that "given the id, reproduce the rest of the line" is well defined.
REQUIRED_ROLES: dict[Target, tuple[Role, ...]] = {
    "items": ("item_id",),
    "users": ("user_id",),
    "interactions": ("user_id", "item_id"),
}
ALLOWED_ROLES: dict[Target, frozenset[Role]] = {
    "items": frozenset({"item_id"}),
    "users": frozenset({"user_id"}),
    "interactions": frozenset({"user_id", "item_id", "timestamp"}),
}


class DatasetError(ValueError):
    """Bad dataset input a user can fix. ``field`` names the part of the request that is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ColumnMapping:
    """Which columns form a record's line (``columns``, in order) and which column has which role."""

    columns: tuple[str, ...]
    roles: dict[str, str] = field(default_factory=dict)

    def index_of(self, role: Role) -> int | None:
        column = self.roles.get(role)
        return None if column is None else self.columns.index(column)


# MovieLens-1M's README gives these layouts (movies.dat, users.dat, ratings.dat).
MOVIELENS_MAPPINGS: dict[Target, ColumnMapping] = {
    "items": ColumnMapping(("MovieID", "Title", "Genres"), {"item_id": "MovieID"}),
    "users": ColumnMapping(("UserID", "Gender", "Age", "Occupation", "Zip-code"), {"user_id": "UserID"}),
    "interactions": ColumnMapping(
        ("UserID", "MovieID", "Rating", "Timestamp"),
        {"user_id": "UserID", "item_id": "MovieID", "timestamp": "Timestamp"},
    ),
}


def mapping_from_dict(target: Target, raw: dict | None, fmt: FileFormat) -> ColumnMapping | None:
    """Build a mapping from its JSON form ``{"columns": [...], "roles": {...}}``.

    ``None`` means "the default": MovieLens' own layout for ``.dat`` files, and for CSV/TSV the header's
    columns in file order with roles guessed from common names (resolved later, once the header is read).
    """
    if raw is None:
        return MOVIELENS_MAPPINGS[target] if fmt == "movielens" else None
    if not isinstance(raw, dict) or set(raw) - {"columns", "roles"}:
        raise DatasetError("mapping", 'a column mapping is an object {"columns": [...], "roles": {...}}')
    columns = raw.get("columns")
    roles = raw.get("roles") or {}
    if columns is not None and (
        not isinstance(columns, list) or not columns or not all(isinstance(c, str) and c for c in columns)
    ):
        raise DatasetError("mapping.columns", "columns must be a non-empty list of column names")
    if not isinstance(roles, dict) or not all(isinstance(v, str) for v in roles.values()):
        raise DatasetError("mapping.roles", "roles must map a role name to a column name")
    if columns is None:
        if fmt == "movielens":
            raise DatasetError("mapping.columns", "a .dat file's mapping must name its columns in order")
        return ColumnMapping((), dict(roles))  # columns filled from the header
    mapping = ColumnMapping(tuple(columns), dict(roles))
    validate_mapping(target, mapping)
    return mapping


def validate_mapping(target: Target, mapping: ColumnMapping, header: tuple[str, ...] | None = None) -> None:
    """Reject a mapping that cannot describe a ``target`` file (with ``header``, when it is known)."""
    unknown_roles = set(mapping.roles) - set(ALLOWED_ROLES[target])
    if unknown_roles:
        raise DatasetError(
            "mapping.roles",
            f"{len(unknown_roles)} unknown role(s) for {target}; allowed: {sorted(ALLOWED_ROLES[target])}",
        )
    missing = [r for r in REQUIRED_ROLES[target] if r not in mapping.roles]
    if missing:
        raise DatasetError("mapping.roles", f"a {target} file needs the role(s) {missing}")
    if len(set(mapping.columns)) != len(mapping.columns):
        raise DatasetError("mapping.columns", "a column is named twice")
    for role, column in mapping.roles.items():
        if column not in mapping.columns:
            raise DatasetError("mapping.roles", f"role {role} names a column that is not one of the columns")
    key_column = mapping.roles[REQUIRED_ROLES[target][0]]
    if mapping.columns[0] != key_column:
        role = REQUIRED_ROLES[target][0]
        raise DatasetError("mapping.columns", f"the id column (role {role}) must come first in columns")
    if header is not None:
        absent = [c for c in mapping.columns if c not in header]
        if absent:
            raise DatasetError("mapping.columns", f"{len(absent)} column(s) of the mapping are not in the header row")


_ROLE_GUESSES: dict[Role, tuple[str, ...]] = {
    "item_id": ("item_id", "itemid", "movieid", "movie_id", "item", "asin", "product_id"),
    "user_id": ("user_id", "userid", "user", "reviewer_id", "reviewerid"),
    "timestamp": ("timestamp", "time", "ts", "unix_time", "unixreviewtime"),
}


def resolve_mapping(target: Target, mapping: ColumnMapping | None, header: tuple[str, ...]) -> ColumnMapping:
    """Complete a CSV/TSV mapping from the file's header row and check it."""
    columns = mapping.columns if mapping and mapping.columns else header
    roles = dict(mapping.roles) if mapping else {}
    for role in ALLOWED_ROLES[target]:
        if role not in roles:
            lowered = {c.lower(): c for c in columns}
            found = next((lowered[g] for g in _ROLE_GUESSES[role] if g in lowered), None)
            if found is not None:
                roles[role] = found
    resolved = ColumnMapping(tuple(columns), roles)
    if mapping is None or not mapping.columns:
        key = roles.get(REQUIRED_ROLES[target][0])
        if key is not None and key in columns:  # put the id first when the header has it elsewhere
            resolved = ColumnMapping((key, *[c for c in columns if c != key]), roles)
    validate_mapping(target, resolved, header)
    return resolved
