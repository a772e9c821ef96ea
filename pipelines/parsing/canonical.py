"""The canonical form of a function's code: what a clone keeps once edits that do not change
behaviour are undone (issue 19, ``find_duplicates``).

The tree-sitter tree is rendered back to text with:

* comments and Python docstrings dropped; type annotations dropped where a language makes
  them optional (Python, TypeScript: parameter, return and variable types, type arguments,
  ``as``/``satisfies``/``!``);
* ``x = x + e`` written ``x += e``; ``b > a`` written ``a < b`` (``>=`` likewise); the operands
  of ``==``/``!=`` in a fixed order;
* ``t = e`` directly followed by ``return t`` written ``return e``;
* an ``if``/``else`` (or an ``if`` and the ``return`` after it) whose branches each return, or
  each assign the same name, written as a conditional expression;
* a list (or set) built by a loop of ``append`` (``add``; ``push`` in TypeScript), with at most
  one ``if``, written as a comprehension (``xs.filter(...).map(...)``).

Names, formatting and literal spelling are left to the token comparison
(``resources.code_similarity``), which abstracts local names and ignores layout.
"""

from __future__ import annotations

import re
import textwrap
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import structlog
from tree_sitter import Node, Query, QueryCursor

from pipelines.parsing.languages import get_parser
from resources.code_similarity import AUGMENTABLE_OPERATORS

log = structlog.get_logger("codemem.canonical")

Rewrite = str
"""One of ``augmented``, ``comparison``, ``temporary``, ``conditional``, ``comprehension``."""

_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})
_PY_TYPES = frozenset({"type"})
_TS_TYPES = frozenset({"type_annotation", "type_parameters", "type_arguments"})
_TS_TYPE_WRAPPERS = frozenset({"as_expression", "satisfies_expression", "non_null_expression"})
_FLIPPED = {">": "<", ">=": "<="}
_SYMMETRIC = frozenset({"==", "!=", "===", "!=="})
_ECMA = frozenset({"javascript", "typescript", "tsx"})
_BLOCKS = frozenset({"block", "statement_block"})
_LOCAL_NAME = re.compile(r"(?<![\w.])[^\W\d]\w*")
"""A name not reached through ``.``: a local, a parameter or a global (abstracted when ordering)."""


def _joined(parts: list[str]) -> str:
    """The parts as one text, a space put where two words would otherwise run together
    (``return(f(x))`` without its parentheses is ``return f(x)``, not ``returnf(x)``)."""
    text = parts[0] if parts else ""
    for part in parts[1:]:
        if part and text and (text[-1].isalnum() or text[-1] == "_") and (part[0].isalnum() or part[0] == "_"):
            text += " "
        text += part
    return text


@dataclass(frozen=True)
class CanonicalCode:
    """A function's code in canonical form, and what was taken out to get there.

    Attributes:
        text: The canonical code (for token comparison and embedding, not for display).
        annotations: The type annotations removed, in source order.
        docstring: The docstring removed (Python), or None.
        comments: How many comments were removed.
        rewrites: The statement rewrites applied, one entry per rewrite.
    """

    text: str
    annotations: tuple[str, ...] = ()
    docstring: str | None = None
    comments: int = 0
    rewrites: tuple[Rewrite, ...] = ()


@dataclass
class _Statement:
    """A rendered statement and what block rules need to know of it."""

    text: str
    target: str | None = None  # `target = value` with a plain name
    value: str | None = None
    returns: str | None = None  # `return value`
    node: Node | None = None


@dataclass
class _Renderer:
    source: bytes
    language: str
    annotations: list[str] = field(default_factory=list)
    docstring: str | None = None
    comments: int = 0
    rewrites: list[Rewrite] = field(default_factory=list)
    docstrings: set[int] = field(default_factory=set)
    memo: dict[int, str] = field(default_factory=dict)
    folded: dict[int, list[_Statement]] = field(default_factory=dict)
    holds_block: dict[int, bool] = field(default_factory=dict)
    rules: dict[str, Callable[[Node], str | None]] = field(init=False)
    code: str = field(init=False)
    marks: list[int] = field(default_factory=list)
    """Start bytes of the nodes a rule may render otherwise than as written (sorted): a subtree
    holding none of them renders as its text, without walking it."""
    block_marks: list[int] = field(default_factory=list)
    """Start bytes of the blocks of statements (sorted)."""

    def __post_init__(self) -> None:
        self.rules = self._rules()
        self.code = self.source.decode("utf-8", "replace")

    def mark(self, root: Node) -> None:
        """Find, in one query, the nodes a rule may rewrite (:attr:`marks`) and the blocks."""
        captures = QueryCursor(_shaped_query(self.language, frozenset(self.rules))).captures(root)
        self.marks = sorted(node.start_byte for node in captures.get("shaped", []))
        self.block_marks = sorted(node.start_byte for node in captures.get("block", []))

    @staticmethod
    def _holds_mark(marks: list[int], node: Node) -> bool:
        index = bisect_left(marks, node.start_byte)
        return index < len(marks) and marks[index] < node.end_byte

    # -- generic ---------------------------------------------------------------------------

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def render(self, node: Node) -> str:
        """The canonical text of a node (rendered once: rules look at children again)."""
        known = self.memo.get(node.id)
        if known is not None:
            return known
        rule = self.rules.get(node.type)
        if rule is None and not self._holds_mark(self.marks, node):
            return self.text(node)  # nothing in it is rewritten
        out = rule(node) if rule is not None else None
        if out is None:
            out = self.splice(node)
        self.memo[node.id] = out
        return out

    def splice(self, node: Node, skip: Callable[[Node], bool] | None = None) -> str:
        """The node's text with each child rendered (children for which ``skip`` holds left out).

        Children no rule rewrites (no mark in their text) are copied with the text around them,
        as one slice."""
        if not node.children:
            return self.text(node)
        parts: list[str] = []
        copied_to = node.start_byte  # the text from here to the next rewritten child is kept as is
        for child in node.children:
            if skip is not None and skip(child):
                replacement = " "
            elif not self._holds_mark(self.marks, child):
                continue
            elif child.type in _COMMENTS:
                self.comments += 1
                replacement = " "
            elif self._is_type(child):
                replacement = " "
            else:
                replacement = self.render(child)
            if child.start_byte > copied_to:
                parts.append(self.source[copied_to : child.start_byte].decode("utf-8", "replace"))
            parts.append(replacement)
            copied_to = max(copied_to, child.end_byte)
        parts.append(self.source[copied_to : node.end_byte].decode("utf-8", "replace"))
        return _joined(parts)

    def _is_type(self, node: Node) -> bool:
        if self.language == "python":
            parent = node.parent
            if node.type in _PY_TYPES and parent is not None and parent.type != "generic_type":
                self.annotations.append(self.text(node))
                return True
            return False
        if self.language in ("typescript", "tsx") and node.type in _TS_TYPES:
            self.annotations.append(self.text(node))
            return True
        return False

    def _rules(self) -> dict[str, Callable[[Node], str | None]]:
        rules: dict[str, Callable[[Node], str | None]] = {
            "comparison_operator": self._python_comparison,
            "binary_expression": self._binary,
            "assignment": self._python_assignment,
            "assignment_expression": self._assignment,
            "parenthesized_expression": self._parenthesized,
            "dictionary": self._entries, "object": self._entries,
        }
        if self.language == "python":
            rules.update({
                "block": self._block, "module": self._block,
                "typed_parameter": self._python_typed_parameter,
                "typed_default_parameter": self._python_typed_default,
                "function_definition": self._python_function,
            })
        elif self.language in _ECMA:
            rules.update({"statement_block": self._block, "program": self._block})
            for wrapper in _TS_TYPE_WRAPPERS:
                rules[wrapper] = self._type_wrapper
        return rules

    # -- expressions -----------------------------------------------------------------------

    def _operand_key(self, node: Node) -> tuple[int, str, int]:
        """Order of ``==`` operands, the same whatever the names and whichever came first:
        literals last, then by shape (local names abstracted), then by where the operand's first
        name first appears in the function (parameters before locals)."""
        literal = node.type in ("integer", "float", "number", "string", "true", "false", "none", "null",
                                "undefined", "nil", "int_literal", "float_literal")
        text = self.render(node)
        names = _LOCAL_NAME.findall(text)
        return (1 if literal else 0, _LOCAL_NAME.sub("ID", text), self._first_seen(names[0]) if names else -1)

    def _first_seen(self, name: str) -> int:
        """Byte offset of a name's first appearance in the code (-1 when absent)."""
        found = re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", self.code)
        return found.start() if found else -1

    def _python_comparison(self, node: Node) -> str | None:
        operands = node.named_children
        operators = [child for child in node.children if not child.is_named]
        if len(operands) != 2 or len(operators) != 1:
            return None
        return self._compare(operands[0], self.text(operators[0]), operands[1])

    def _binary(self, node: Node) -> str | None:
        left, right, operator = (node.child_by_field_name(name) for name in ("left", "right", "operator"))
        if left is None or right is None or operator is None:
            return None
        op = self.text(operator)
        if op in _FLIPPED or op in _SYMMETRIC:
            return self._compare(left, op, right)
        return None

    def _compare(self, left: Node, op: str, right: Node) -> str:
        if op in _FLIPPED:
            self.rewrites.append("comparison")
            return f"{self.render(right)} {_FLIPPED[op]} {self.render(left)}"
        if op in _SYMMETRIC and self._operand_key(right) < self._operand_key(left):
            self.rewrites.append("comparison")
            return f"{self.render(right)} {op} {self.render(left)}"
        return f"{self.render(left)} {op} {self.render(right)}"

    def _python_assignment(self, node: Node) -> str | None:
        annotation = node.child_by_field_name("type")
        right = node.child_by_field_name("right")
        if annotation is not None:
            self.annotations.append(self.text(annotation))
            left = node.child_by_field_name("left")
            if right is None or left is None:
                return ""
            return f"{self.render(left)} = {self.render(right)}"
        return self._augmented(node)

    def _assignment(self, node: Node) -> str | None:
        operator = node.child_by_field_name("operator")
        if operator is not None and self.text(operator) != "=":
            return None
        return self._augmented(node)

    def _augmentable(self, node: Node) -> tuple[Node, str, Node] | None:
        """``(x, op, e)`` of an assignment ``x = x op e``."""
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None or right.type not in ("binary_operator", "binary_expression"):
            return None
        inner, operator, operand = (right.child_by_field_name(name) for name in ("left", "operator", "right"))
        if inner is None or operand is None or operator is None or self.text(operator) not in AUGMENTABLE_OPERATORS \
                or self.text(inner) != self.text(left):
            return None
        return left, self.text(operator), operand

    def _augmented(self, node: Node) -> str | None:
        """``x = x op e`` as ``x op= e``."""
        parts = self._augmentable(node)
        if parts is None:
            return None
        left, operator, operand = parts
        self.rewrites.append("augmented")
        return f"{self.render(left)} {operator}= {self._unwrapped(operand)}"

    def _unwrapped(self, node: Node) -> str:
        """A node rendered without the parentheses around it."""
        while node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        return self.render(node)

    def _parenthesized(self, node: Node) -> str | None:
        """Parentheses around a whole returned or assigned value are layout."""
        parent = node.parent
        if parent is None or node.named_child_count != 1:
            return None
        if parent.type in ("return_statement", "expression_statement") or (
            parent.type in ("assignment", "variable_declarator") and parent.child_by_field_name("right" if parent.type == "assignment" else "value") == node
        ):
            return self._unwrapped(node)
        return None

    def _entries(self, node: Node) -> str | None:
        """A dict or object literal with its entries in key order (order does not change it)."""
        if node.child_count < 2 or node.children[0].type not in ("{", "["):
            return None  # the `object` type keyword, not a literal
        entries = [child for child in node.named_children if child.type not in _COMMENTS]
        if any(entry.type not in ("pair", "shorthand_property_identifier") for entry in entries):
            return None  # spreads (`**a`, `...a`) make order matter
        opener, closer = self.text(node.children[0]), self.text(node.children[-1])
        rendered = sorted(self.render(entry) for entry in entries)
        return opener + ", ".join(rendered) + closer

    def _type_wrapper(self, node: Node) -> str | None:
        if not node.named_children:
            return None
        self.annotations.append(self.text(node)[len(self.text(node.named_children[0])):].strip())
        return self.render(node.named_children[0])

    # -- Python declarations ---------------------------------------------------------------

    def _python_typed_parameter(self, node: Node) -> str | None:
        return self.splice(node, skip=lambda child: child.type == ":")

    def _python_typed_default(self, node: Node) -> str | None:
        name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        annotation = node.child_by_field_name("type")
        if name is None or value is None:
            return None
        if annotation is not None:
            self.annotations.append(self.text(annotation))
        return f"{self.render(name)}={self.render(value)}"

    def _python_function(self, node: Node) -> str | None:
        return_type = node.child_by_field_name("return_type")
        if return_type is not None:
            self.annotations.append(self.text(return_type))
        body = node.child_by_field_name("body")
        if body is not None:
            first = next((child for child in body.named_children if child.type not in _COMMENTS), None)
            if first is not None and first.type == "expression_statement" and first.named_child_count == 1 \
                    and first.named_children[0].type in ("string", "concatenated_string"):
                self.docstrings.add(first.id)
                if self.docstring is None:
                    self.docstring = self.text(first)
        return self.splice(node, skip=lambda child: child.type == "->" or child == return_type)

    # -- statement blocks ------------------------------------------------------------------

    def _holds_block(self, node: Node) -> bool:
        """Whether a statement has a block of statements inside (an ``if``, a loop, a callback
        body); remembered per node, as a nested block's statements ask again."""
        if not self._holds_mark(self.block_marks, node):  # no block anywhere in its text
            return False
        known = self.holds_block.get(node.id)
        if known is None:
            known = self.holds_block[node.id] = any(
                child.type in _BLOCKS or (child.child_count > 0 and self._holds_block(child)) for child in node.children
            )
        return known

    def _block(self, node: Node) -> str | None:
        statements: list[_Statement] = []
        children = [child for child in node.named_children if child.type not in _COMMENTS]
        self.comments += node.named_child_count - len(children)
        statements.extend(self._statement(child) for child in children if child.id not in self.docstrings)
        statements = self._fold(statements)
        self.folded[node.id] = statements
        for statement in statements:  # one line per simple statement, whatever its layout
            if statement.node is None or not self._holds_block(statement.node):
                statement.text = " ".join(statement.text.split())
        opener = "{" if node.type == "statement_block" else ""
        closer = "}" if node.type == "statement_block" else ""
        return opener + "\n" + "\n".join(statement.text for statement in statements) + "\n" + closer

    def _statement(self, node: Node) -> _Statement:
        text = self.render(node)
        statement = _Statement(text, node=node)
        if node.type == "return_statement":
            values = node.named_children
            statement.returns = self._unwrapped(values[0]) if len(values) == 1 else None
        elif node.type == "expression_statement" and node.named_child_count == 1:
            inner = node.named_children[0]
            left, right = inner.child_by_field_name("left"), inner.child_by_field_name("right")
            if inner.type in ("assignment", "assignment_expression") and left is not None and right is not None \
                    and left.type == "identifier" and inner.child_by_field_name("operator") is None \
                    and self._augmentable(inner) is None:
                statement.target, statement.value = self.text(left), self._unwrapped(right)
        elif node.type in ("lexical_declaration", "variable_declaration") and node.named_child_count == 1:
            declarator = node.named_children[0]
            name, value = declarator.child_by_field_name("name"), declarator.child_by_field_name("value")
            if name is not None and value is not None and name.type == "identifier":
                statement.target, statement.value = self.text(name), self._unwrapped(value)
        return statement

    def _fold(self, statements: list[_Statement]) -> list[_Statement]:
        """Apply the block rules until none applies."""
        changed = True
        while changed:
            changed = False
            for index in range(len(statements)):
                current = statements[index]
                following = statements[index + 1] if index + 1 < len(statements) else None
                folded = self._conditional(current, following)
                if folded is None and following is not None:
                    folded = self._comprehension(current, following) or self._temporary(current, following)
                if folded is not None:
                    replacement, consumed = folded
                    statements[index : index + consumed] = [replacement]
                    changed = True
                    break
        return statements

    def _temporary(self, current: _Statement, following: _Statement) -> tuple[_Statement, int] | None:
        if current.target is None or following.returns != current.target or current.value is None:
            return None
        self.rewrites.append("temporary")
        return self._return(current.value), 2

    def _return(self, value: str) -> _Statement:
        end = ";" if self.language in _ECMA else ""
        return _Statement(f"return {value}{end}", returns=value)

    def _ternary(self, condition: str, yes: str, no: str) -> str:
        if self.language == "python":
            return f"{yes} if {condition} else {no}"
        return f"{condition} ? {yes} : {no}"

    def _only_statement(self, node: Node | None) -> _Statement | None:
        """The single statement of a branch (a block of one statement, or a bare statement)."""
        if node is None:
            return None
        if node.type == "else_clause":
            body = node.child_by_field_name("body") or next(
                (child for child in node.named_children if child.type not in _COMMENTS), None
            )
            return self._only_statement(body)
        if node.type in _BLOCKS:
            self.render(node)  # folds the block's statements
            inner = self.folded.get(node.id, [])
            return inner[0] if len(inner) == 1 else None
        return self._statement(node)

    def _condition(self, node: Node) -> str | None:
        condition = node.child_by_field_name("condition")
        return None if condition is None else self._unwrapped(condition)

    def _conditional(self, current: _Statement, following: _Statement | None) -> tuple[_Statement, int] | None:
        node = current.node
        if node is None or node.type != "if_statement":
            return None
        alternative = node.child_by_field_name("alternative")
        if alternative is not None and alternative.type != "else_clause":
            return None  # elif
        yes = self._only_statement(node.child_by_field_name("consequence"))
        condition = self._condition(node)
        if yes is None or condition is None:
            return None
        if alternative is None:
            if following is None or yes.returns is None or following.returns is None:
                return None
            self.rewrites.append("conditional")
            return self._return(self._ternary(condition, yes.returns, following.returns)), 2
        no = self._only_statement(alternative)
        if no is None:
            return None
        if yes.returns is not None and no.returns is not None:
            self.rewrites.append("conditional")
            return self._return(self._ternary(condition, yes.returns, no.returns)), 1
        if yes.target is not None and yes.target == no.target and yes.value is not None and no.value is not None:
            self.rewrites.append("conditional")
            value = self._ternary(condition, yes.value, no.value)
            end = ";" if self.language in _ECMA else ""
            return _Statement(f"{yes.target} = {value}{end}", target=yes.target, value=value), 1
        return None

    def _comprehension(self, current: _Statement, following: _Statement) -> tuple[_Statement, int] | None:
        loop = following.node
        if current.target is None or current.value is None or loop is None:
            return None
        if self.language == "python":
            return self._python_comprehension(current, loop)
        if self.language in _ECMA:
            return self._ecma_map(current, loop)
        return None

    def _appended(self, node: Node | None, target: str, methods: tuple[str, ...]) -> tuple[str | None, str] | None:
        """``(condition, value)`` of a loop body that only appends to ``target`` (maybe under one ``if``)."""
        if node is None:
            return None
        inner = [child for child in node.named_children if child.type not in _COMMENTS] \
            if node.type in _BLOCKS else [node]
        if len(inner) != 1:
            return None
        statement = inner[0]
        if statement.type == "if_statement" and statement.child_by_field_name("alternative") is None:
            condition = self._condition(statement)
            body = self._appended(statement.child_by_field_name("consequence"), target, methods)
            if condition is None or body is None or body[0] is not None:
                return None
            return condition, body[1]
        if statement.type != "expression_statement" or statement.named_child_count != 1:
            return None
        call = statement.named_children[0]
        function, arguments = call.child_by_field_name("function"), call.child_by_field_name("arguments")
        if call.type not in ("call", "call_expression") or function is None or arguments is None:
            return None
        owner = function.child_by_field_name("object")
        member = function.child_by_field_name("attribute") or function.child_by_field_name("property")
        values = [child for child in arguments.named_children if child.type not in _COMMENTS]
        if owner is None or member is None or self.text(owner) != target or self.text(member) not in methods \
                or len(values) != 1 or values[0].type in ("keyword_argument", "list_splat", "spread_element"):
            return None
        return None, self.render(values[0])

    def _python_comprehension(self, current: _Statement, loop: Node) -> tuple[_Statement, int] | None:
        if loop.type != "for_statement" or loop.child_by_field_name("alternative") is not None:
            return None
        brackets = {"[]": ("[", "]", ("append",)), "set()": ("{", "}", ("add",))}.get(current.value.replace(" ", ""))
        left, right = loop.child_by_field_name("left"), loop.child_by_field_name("right")
        if brackets is None or left is None or right is None or current.target is None:
            return None
        appended = self._appended(loop.child_by_field_name("body"), current.target, brackets[2])
        if appended is None:
            return None
        condition, value = appended
        clause = f" if {condition}" if condition is not None else ""
        built = f"{brackets[0]}{value} for {self.render(left)} in {self.render(right)}{clause}{brackets[1]}"
        self.rewrites.append("comprehension")
        return _Statement(f"{current.target} = {built}", target=current.target, value=built), 2

    def _ecma_map(self, current: _Statement, loop: Node) -> tuple[_Statement, int] | None:
        operator = loop.child_by_field_name("operator")
        if loop.type != "for_in_statement" or operator is None or self.text(operator) != "of" \
                or current.value.replace(" ", "") != "[]" or current.target is None:
            return None
        left, right = loop.child_by_field_name("left"), loop.child_by_field_name("right")
        appended = self._appended(loop.child_by_field_name("body"), current.target, ("push",))
        if left is None or right is None or appended is None:
            return None
        condition, value = appended
        item = self.render(left)
        built = self.render(right)
        if condition is not None:
            built += f".filter(({item}) => {condition})"
        built += f".map(({item}) => {value})"
        self.rewrites.append("comprehension")
        return _Statement(f"const {current.target} = {built};", target=current.target, value=built), 2


_CLASS_MEMBERS = frozenset({"javascript", "typescript", "tsx", "java", "csharp"})
_WRAPPER_OPEN, _WRAPPER_CLOSE = "class Snippet__ {\n", "\n}\n"


@lru_cache(maxsize=None)
def _shaped_query(language: str, rule_types: frozenset[str]) -> Query:
    """The query capturing, in a language's tree, the nodes whose rendering may differ from their
    text (``shaped``: a rule's node, a comment, a type annotation) and the blocks of statements
    (``block``); node types the grammar lacks are left out."""
    grammar = get_parser(language).language  # type: ignore[arg-type]
    types = rule_types | _COMMENTS | (_PY_TYPES if language == "python" else _TS_TYPES if language in ("typescript", "tsx") else frozenset())
    known = sorted(kind for kind in types if grammar.id_for_node_kind(kind, True) is not None)
    blocks = sorted(kind for kind in _BLOCKS if grammar.id_for_node_kind(kind, True) is not None)
    source = "[" + " ".join(f"({kind})" for kind in known) + "] @shaped"
    if blocks:
        source += " [" + " ".join(f"({kind})" for kind in blocks) + "] @block"
    return Query(grammar, source)


def _member(root: Node) -> Node | None:
    """The class body of a wrapped member (its first class's body)."""
    for node in root.named_children:
        if node.type in ("class_declaration", "class"):
            return node.child_by_field_name("body")
    return None


def _parse(code: str, language: str) -> tuple[bytes, Node, bool]:
    """``(source, node to render, wrapped)``: the code's tree, or, for a class member that does not
    parse on its own (a TypeScript, JavaScript, Java or C# method), its tree inside a class.

    Raises:
        ValueError: For an unsupported language.
    """
    parser = get_parser(language)  # type: ignore[arg-type]
    source = code.encode("utf-8")
    root = parser.parse(source).root_node
    if root.has_error and language in _CLASS_MEMBERS:
        wrapped_source = (_WRAPPER_OPEN + code + _WRAPPER_CLOSE).encode("utf-8")
        wrapped = parser.parse(wrapped_source).root_node
        if not wrapped.has_error:
            return wrapped_source, _member(wrapped) or wrapped, True
    return source, root, False


def wrap_member(code: str, language: str) -> str | None:
    """The code inside a class, when it is a class member that does not parse on its own
    (a TypeScript, JavaScript, Java or C# method), else None."""
    if language not in _CLASS_MEMBERS:
        return None
    source, _, wrapped = _parse(code, language)
    return source.decode("utf-8") if wrapped else None


@lru_cache(maxsize=8192)
def canonical_code(code: str, language: str) -> CanonicalCode:
    """The canonical form of a function's code (see the module docstring).

    Args:
        code: One function's source (a method's may be indented; a snippet may hold more).
        language: Its language (``python``, ``typescript``, ``go``, ...).

    Returns:
        The canonical text and what was removed or rewritten. Code that does not parse is
        rendered as far as the tree goes (tree-sitter recovers from errors).
    """
    language = language.lower()
    if code[:1].isspace():
        code = textwrap.dedent(code)
    try:
        source, root, _ = _parse(code, language)
    except ValueError:
        return CanonicalCode(code)
    renderer = _Renderer(source, language)
    try:
        renderer.mark(root)
        text = renderer.render(root)
    except (RecursionError, IndexError, ValueError) as exc:  # a shape no rule expected: compare as written
        log.warning("canonical form failed; comparing the code as written", language=language, error=repr(exc))
        return CanonicalCode(code)
    return CanonicalCode(
        text=text, annotations=tuple(a for a in renderer.annotations if a), docstring=renderer.docstring,
        comments=renderer.comments, rewrites=tuple(renderer.rewrites),
    )
