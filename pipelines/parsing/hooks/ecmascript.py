"""JavaScript/TypeScript/TSX hooks: JSDoc, ``export`` wrappers, decorators, ES imports, ``require``."""

from __future__ import annotations

from tree_sitter import Node

from resources.schemas.code import ImportRef

from pipelines.parsing.hooks.base import LanguageHooks, first_named, text_of


def _string_value(node: Node | None, source: bytes) -> str | None:
    """Value of a string literal node without its quotes."""
    if node is None or node.type != "string":
        return None
    return text_of(node, source)[1:-1]


class EcmaScriptHooks(LanguageHooks):
    """Hooks shared by JavaScript, TypeScript and TSX."""

    wrapper_types = frozenset({"export_statement"})
    decorator_types = frozenset({"decorator"})
    async_capable = True

    def parse_import(self, node: Node, source: bytes) -> list[ImportRef]:
        """ES ``import``/re-``export ... from`` statements and ``require()`` declarators.

        Named imports go to ``items``; a default or namespace import's local name is the
        ``alias`` (else the alias of a single renamed named import). ``const x = require("m")``
        gives alias ``x``; ``const { a, b } = require("m")`` gives items ``[a, b]``.
        """
        line = node.start_point[0] + 1
        if node.type == "variable_declarator":
            return self._require(node, source, line)
        module = _string_value(node.child_by_field_name("source"), source)
        if module is None:
            if node.type == "import_statement":
                req = next(
                    (
                        c
                        for c in node.named_children
                        if c.type == "import_require_clause"
                    ),
                    None,
                )
                if req is not None:
                    name = first_named(req)
                    return [
                        ImportRef(
                            module=_string_value(
                                req.child_by_field_name("source"), source
                            )
                            or "",
                            alias=text_of(name, source) if name is not None else None,
                            line=line,
                        )
                    ]
            return []
        items: list[str] = []
        item_aliases: list[str | None] = []
        alias: str | None = None
        for child in node.named_children:
            if child.type == "import_clause":
                for part in child.named_children:
                    if part.type == "identifier":
                        alias = text_of(part, source)
                    elif part.type == "namespace_import":
                        ident = first_named(part)
                        alias = text_of(ident, source) if ident is not None else None
                    elif part.type == "named_imports":
                        self._specifiers(part, source, items, item_aliases)
            elif child.type == "export_clause":
                self._specifiers(child, source, items, item_aliases)
        if node.type == "export_statement" and not items:
            items.append("*")
            item_aliases.append(None)
        if alias is None and len(items) == 1:
            alias = item_aliases[0]
        return [ImportRef(module=module, items=items, alias=alias, line=line)]

    @staticmethod
    def _specifiers(
        node: Node, source: bytes, items: list[str], aliases: list[str | None]
    ) -> None:
        """Append the names (and aliases) of ``{ a, b as c }`` specifiers."""
        for spec in node.named_children:
            if spec.type not in ("import_specifier", "export_specifier"):
                continue
            name = spec.child_by_field_name("name")
            alias = spec.child_by_field_name("alias")
            if name is None:
                continue
            items.append(text_of(name, source))
            aliases.append(text_of(alias, source) if alias is not None else None)

    @staticmethod
    def _require(node: Node, source: bytes, line: int) -> list[ImportRef]:
        """``const x = require("m")`` / ``const { a, b: c } = require("m")``."""
        call = node.child_by_field_name("value")
        fn = call.child_by_field_name("function") if call is not None else None
        if fn is None or text_of(fn, source) != "require":
            return []
        args = call.child_by_field_name("arguments")
        module = _string_value(first_named(args), source)
        target = node.child_by_field_name("name")
        if module is None or target is None:
            return []
        if target.type == "identifier":
            return [ImportRef(module=module, alias=text_of(target, source), line=line)]
        items: list[str] = []
        if target.type == "object_pattern":
            for prop in target.named_children:
                if prop.type == "shorthand_property_identifier_pattern":
                    items.append(text_of(prop, source))
                elif prop.type == "pair_pattern":
                    key = prop.child_by_field_name("key")
                    if key is not None:
                        items.append(text_of(key, source))
        return [ImportRef(module=module, items=items, line=line)]
