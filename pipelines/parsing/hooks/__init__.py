"""Per-language extraction hooks (what the tree-sitter queries cannot express)."""

from .base import LanguageHooks
from .csharp import CSharpHooks
from .ecmascript import EcmaScriptHooks
from .go import GoHooks
from .java import JavaHooks
from .python import PythonHooks
from .rust import RustHooks

__all__ = [
    "CSharpHooks",
    "EcmaScriptHooks",
    "GoHooks",
    "JavaHooks",
    "LanguageHooks",
    "PythonHooks",
    "RustHooks",
]
