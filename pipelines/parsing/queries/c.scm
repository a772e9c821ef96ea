; C — definitions, calls, includes.
; Capture vocabulary: see pipelines/parsing/captures.py; what the patterns cannot say (a prototype
; inside a function body, a struct a typedef names) is filtered in pipelines/parsing/hooks/c.py.

; ---- functions: definitions and prototypes (a prototype is a body-less `function`) ----------
(function_definition
  declarator: [
    (function_declarator declarator: (identifier) @name)
    (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
    (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name)))
  ]) @def.function

(declaration
  declarator: [
    (function_declarator declarator: (identifier) @name)
    (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
    (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name)))
  ]) @def.function

; function-like macros: `#define MAX(a, b) ...` (the body is the replacement text)
(preproc_function_def
  name: (identifier) @name
  value: (preproc_arg)? @body) @def.function

; ---- types ---------------------------------------------------------------
; a tagged struct/union/enum with a body (inside a typedef the typedef's name is used instead)
(struct_specifier
  name: (type_identifier) @name
  body: (field_declaration_list)) @def.struct

(union_specifier
  name: (type_identifier) @name
  body: (field_declaration_list)) @def.struct

(enum_specifier
  name: (type_identifier) @name
  body: (enumerator_list)) @def.enum

; `typedef struct [tag] { ... } name;`
(type_definition
  type: [
    (struct_specifier body: (field_declaration_list) @body)
    (union_specifier body: (field_declaration_list) @body)
  ]
  declarator: (type_identifier) @name) @def.struct

(type_definition
  type: (enum_specifier body: (enumerator_list) @body)
  declarator: (type_identifier) @name) @def.enum

; every other typedef: `typedef unsigned long ulong;`, `typedef struct foo foo_t;`,
; `typedef int (*cb_t)(int);`
(type_definition
  type: [
    (primitive_type) (type_identifier) (sized_type_specifier) (macro_type_specifier)
    (struct_specifier !body) (union_specifier !body) (enum_specifier !body)
  ]
  declarator: [
    (type_identifier) @name
    (pointer_declarator declarator: (type_identifier) @name)
    (function_declarator declarator: (type_identifier) @name)
    (function_declarator
      declarator: (parenthesized_declarator (pointer_declarator declarator: (type_identifier) @name)))
    (array_declarator declarator: (type_identifier) @name)
  ]) @def.type

; ---- calls (macro invocations look the same and are calls too) ----------------------------
(call_expression
  function: (_) @call.callee
  arguments: (argument_list) @call.args)

; ---- includes ------------------------------------------------------------
(preproc_include) @import
