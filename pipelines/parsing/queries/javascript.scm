; JavaScript (.js/.jsx/.mjs/.cjs) — definitions, calls, imports, inheritance.
; Capture vocabulary: see pipelines/parsing/captures.py.

; ---- definitions -------------------------------------------------------
[
  (function_declaration name: (identifier) @name)
  (generator_function_declaration name: (identifier) @name)
] @def.function

(class_declaration
  name: (identifier) @name) @def.class

(class_body
  (method_definition
    name: [(property_identifier) (private_property_identifier) (computed_property_name)] @name) @def.method)

; class fields bound to functions: `handle = () => {}`
(field_definition
  property: [(property_identifier) (private_property_identifier)] @name
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
(class_declaration
  (class_heritage (_) @extends)) @inherit

; ---- calls --------------------------------------------------------------
(call_expression
  function: [
    (identifier) (member_expression) (subscript_expression)
    (call_expression) (parenthesized_expression)
  ] @call.callee
  arguments: (arguments) @call.args)

(new_expression
  constructor: (_) @call.new
  arguments: (arguments) @call.args)

; ---- imports ------------------------------------------------------------
(import_statement) @import

; re-exports: `export { a } from "m"`, `export * from "m"`
(export_statement source: (string)) @import

; `const x = require("m")` / `const { a } = require("m")`; the hook checks the callee is `require`.
(variable_declarator
  value: (call_expression
    function: (identifier)
    arguments: (arguments . (string) .))) @import
