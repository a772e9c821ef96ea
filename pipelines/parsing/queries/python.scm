; Python — definitions, calls, imports, inheritance.
; Capture vocabulary: see pipelines/parsing/captures.py.

; ---- definitions -------------------------------------------------------
(function_definition
  name: (identifier) @name) @def.function

(class_definition
  name: (identifier) @name) @def.class

; ---- inheritance (one match per base; keyword arguments are skipped) ----
(class_definition
  superclasses: (argument_list
    [(identifier) (attribute) (subscript)] @extends)) @inherit

; ---- calls --------------------------------------------------------------
(call
  function: (_) @call.callee
  arguments: (_) @call.args)

; ---- imports (statements are split into ImportRefs by hooks/python.py) --
[
  (import_statement)
  (import_from_statement)
  (future_import_statement)
] @import
