; Go — definitions, calls, imports, inheritance (struct/interface embedding).
; Capture vocabulary: see pipelines/parsing/captures.py.

; ---- definitions -------------------------------------------------------
(function_declaration
  name: (identifier) @name) @def.function

; methods: the receiver's base type becomes the container (`Server.Start`)
(method_declaration
  receiver: (parameter_list (parameter_declaration type: (_) @receiver))
  name: (field_identifier) @name) @def.method

(type_spec
  name: (type_identifier) @name
  type: (struct_type (field_declaration_list) @body)) @def.struct

(type_spec
  name: (type_identifier) @name
  type: (interface_type) @body) @def.interface

; every other named type (`type Labels map[string]string`, `type ValueType int`,
; `type Option func(*Config)`) and aliases (`type Alias = Config`)
(type_spec
  name: (type_identifier) @name
  type: [
    (type_identifier) (qualified_type) (generic_type) (pointer_type) (array_type) (slice_type)
    (map_type) (channel_type) (function_type) (parenthesized_type) (negated_type)
  ]) @def.type

(type_alias
  name: (type_identifier) @name) @def.type

; interface method elements define the contract
(method_elem
  name: (field_identifier) @name) @def.function

; ---- inheritance (embedding) ---------------------------------------------
(type_spec
  type: (struct_type (field_declaration_list
    (field_declaration !name type: (_) @extends)))) @inherit

(type_spec
  type: (interface_type
    (type_elem [(type_identifier) (qualified_type) (generic_type)] @extends))) @inherit

; ---- calls --------------------------------------------------------------
(call_expression
  function: [
    (identifier) (selector_expression) (index_expression)
    (generic_type) (parenthesized_expression) (call_expression)
  ] @call.callee
  arguments: (argument_list) @call.args)

; ---- imports ------------------------------------------------------------
(import_spec) @import
