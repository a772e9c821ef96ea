; Rust — definitions, calls, imports, inheritance (impl Trait for Type).
; Capture vocabulary: see pipelines/parsing/captures.py.
; Macro invocations (`println!`) are not calls.

; ---- definitions -------------------------------------------------------
; functions inside impl/trait bodies become methods (their container is a type)
[
  (function_item name: (identifier) @name)
  (function_signature_item name: (identifier) @name)
] @def.function

(struct_item
  name: (type_identifier) @name) @def.struct

(union_item
  name: (type_identifier) @name) @def.struct

(enum_item
  name: (type_identifier) @name) @def.enum

(trait_item
  name: (type_identifier) @name) @def.trait

; ---- impl blocks: not symbols, but containers of methods ----------------
(impl_item
  trait: (_)? @impl.trait
  type: (_) @impl.type
  body: (declaration_list)) @impl

; ---- inheritance: supertraits --------------------------------------------
(trait_item
  bounds: (trait_bounds [(type_identifier) (scoped_type_identifier) (generic_type)] @extends)) @inherit

; ---- calls --------------------------------------------------------------
(call_expression
  function: [
    (identifier) (scoped_identifier) (field_expression) (generic_function)
    (call_expression) (parenthesized_expression) (index_expression)
  ] @call.callee
  arguments: (arguments) @call.args)

; ---- imports ------------------------------------------------------------
(use_declaration) @import

; ---- inline modules (`mod a { }`; `mod a;` is another file) --------------
(mod_item
  name: (identifier) @namespace.name
  body: (declaration_list)) @namespace
