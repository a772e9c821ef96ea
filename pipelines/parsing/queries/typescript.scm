; TypeScript and TSX — definitions, calls, imports, inheritance.
; Capture vocabulary: see pipelines/parsing/captures.py.

; ---- definitions -------------------------------------------------------
[
  (function_declaration name: (identifier) @name)
  (generator_function_declaration name: (identifier) @name)
] @def.function

[
  (class_declaration name: (type_identifier) @name)
  (abstract_class_declaration name: (type_identifier) @name)
] @def.class

(interface_declaration
  name: (type_identifier) @name) @def.interface

(enum_declaration
  name: (identifier) @name) @def.enum

(type_alias_declaration
  name: (type_identifier) @name) @def.type

(class_body
  [
    (method_definition
      name: [(property_identifier) (private_property_identifier) (computed_property_name)] @name)
    (abstract_method_signature
      name: [(property_identifier) (private_property_identifier) (computed_property_name)] @name)
  ] @def.method)

; interface members without bodies define the contract
(interface_body
  (method_signature
    name: [(property_identifier) (computed_property_name)] @name) @def.method)

; class fields bound to functions: `handle = () => {}`
(public_field_definition
  name: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression) (generator_function)] @fn) @def.method

; `const f = async (x) => ...` / `var g = function () {}`
[
  (lexical_declaration
    (variable_declarator
      name: (identifier) @name
      value: [(arrow_function) (function_expression) (generator_function)] @fn))
  (variable_declaration
    (variable_declarator
      name: (identifier) @name
      value: [(arrow_function) (function_expression) (generator_function)] @fn))
] @def.function

; ---- inheritance --------------------------------------------------------
[
  (class_declaration (class_heritage (extends_clause value: (_) @extends)))
  (abstract_class_declaration (class_heritage (extends_clause value: (_) @extends)))
] @inherit

[
  (class_declaration (class_heritage (implements_clause (_) @implements)))
  (abstract_class_declaration (class_heritage (implements_clause (_) @implements)))
] @inherit

(interface_declaration
  (extends_type_clause type: (_) @extends)) @inherit

; ---- calls --------------------------------------------------------------
(call_expression
  function: [
    (identifier) (member_expression) (subscript_expression)
    (call_expression) (parenthesized_expression) (non_null_expression)
  ] @call.callee
  arguments: (arguments) @call.args)

(new_expression
  constructor: (_) @call.new
  arguments: (arguments) @call.args)

; ---- imports ------------------------------------------------------------
(import_statement) @import

; re-exports: `export { a } from "m"`, `export * from "m"`
(export_statement source: (string)) @import

(variable_declarator
  value: (call_expression
    function: (identifier)
    arguments: (arguments . (string) .))) @import

; ---- namespaces (`namespace A.B { }`, `module M { }`; not `declare module "x"`) --
[
  (internal_module name: [(identifier) (nested_identifier)] @namespace.name body: (_))
  (module name: [(identifier) (nested_identifier)] @namespace.name body: (_))
] @namespace
