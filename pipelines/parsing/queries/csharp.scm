; C# — definitions, calls, imports, inheritance.
; Capture vocabulary: see pipelines/parsing/captures.py.
; Namespaces are not containers; properties are not symbols.

; ---- definitions -------------------------------------------------------
[
  (class_declaration name: (identifier) @name)
  (record_declaration name: (identifier) @name)
] @def.class

(interface_declaration
  name: (identifier) @name) @def.interface

(struct_declaration
  name: (identifier) @name) @def.struct

(enum_declaration
  name: (identifier) @name) @def.enum

; methods (interface methods without a body included) and constructors
[
  (method_declaration name: (identifier) @name)
  (constructor_declaration name: (identifier) @name)
] @def.method

(local_function_statement
  name: (identifier) @name) @def.function

; ---- inheritance: every base-list type; I[A-Z]* names go to `implements` --
[
  (class_declaration (base_list (_) @extends))
  (record_declaration (base_list (_) @extends))
  (struct_declaration (base_list (_) @extends))
  (interface_declaration (base_list (_) @extends))
  (enum_declaration (base_list (_) @extends))
] @inherit

; ---- calls --------------------------------------------------------------
(invocation_expression
  function: (_) @call.callee
  arguments: (argument_list) @call.args)

(object_creation_expression
  type: (_) @call.new
  arguments: (argument_list) @call.args)

; ---- imports ------------------------------------------------------------
(using_directive) @import
