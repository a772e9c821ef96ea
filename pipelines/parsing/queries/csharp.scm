; C# — definitions, calls, imports, inheritance.
; Capture vocabulary: see pipelines/parsing/captures.py.
; Namespaces are not containers (they make the symbols' `namespace`); properties are not symbols.

; ---- definitions -------------------------------------------------------
(class_declaration
  name: (identifier) @name) @def.class

(record_declaration
  name: (identifier) @name) @def.record

(interface_declaration
  name: (identifier) @name) @def.interface

(struct_declaration
  name: (identifier) @name) @def.struct

(enum_declaration
  name: (identifier) @name) @def.enum

; methods (interface methods without a body included)
(method_declaration
  name: (identifier) @name) @def.method

(constructor_declaration
  name: (identifier) @name) @def.constructor

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

; ---- namespaces (not containers): blocks nest, `namespace A.B;` covers the rest of the file --
(namespace_declaration
  name: (_) @namespace.name) @namespace

(file_scoped_namespace_declaration
  name: (_) @namespace.name) @namespace.file
