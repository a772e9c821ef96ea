"""Per-language extraction hooks (what the tree-sitter queries cannot express)."""

from pipelines.parsing.hooks.base import LanguageHooks
from pipelines.parsing.hooks.c import CHooks, CppHooks
from pipelines.parsing.hooks.csharp import CSharpHooks
from pipelines.parsing.hooks.ecmascript import EcmaScriptHooks
from pipelines.parsing.hooks.go import GoHooks
from pipelines.parsing.hooks.java import JavaHooks
from pipelines.parsing.hooks.python import PythonHooks
from pipelines.parsing.hooks.rust import RustHooks

__all__ = [
    "CHooks",
    "CppHooks",
    "CSharpHooks",
    "EcmaScriptHooks",
    "GoHooks",
    "JavaHooks",
    "LanguageHooks",
    "PythonHooks",
    "RustHooks",
]
