; C++ (and `.h` headers) — definitions, calls, includes, inheritance, namespaces.
; Capture vocabulary: see pipelines/parsing/captures.py; what the patterns cannot say (which
; typeless function is a constructor, a prototype inside a function body, a struct a typedef
; names) is decided in pipelines/parsing/hooks/c.py. A template's function or class is recorded
; as that function or class (its `template <...>` line included).

; ---- functions defined or declared with a plain name (in a class body: methods) ------------
(function_definition
  declarator: [
    (function_declarator
      declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)
    (pointer_declarator declarator: (function_declarator
      declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
    (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator
      declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)))
    (reference_declarator (function_declarator
      declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
  ]) @def.function

[
  (declaration
    declarator: [
      (function_declarator
        declarator: [(identifier) (destructor_name) (operator_name)] @name)
      (pointer_declarator declarator: (function_declarator
        declarator: [(identifier) (operator_name)] @name))
      (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator
        declarator: [(identifier) (operator_name)] @name)))
      (reference_declarator (function_declarator
        declarator: [(identifier) (operator_name)] @name))
    ])
  ; member functions declared in a class body (defined out of line, or pure virtual)
  (field_declaration
    declarator: [
      (function_declarator
        declarator: [(field_identifier) (destructor_name) (operator_name)] @name)
      (pointer_declarator declarator: (function_declarator
        declarator: [(field_identifier) (operator_name)] @name))
      (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator
        declarator: [(field_identifier) (operator_name)] @name)))
      (reference_declarator (function_declarator
        declarator: [(field_identifier) (operator_name)] @name))
    ])
] @def.function

; ---- out-of-line member definitions: `void A::f() {}`, `ns::A::A()`, `A<T>::~A()` ------------
; the qualifier (`A`, `ns::A`) is the container; the last name is the method
(function_definition
  declarator: [
    (function_declarator declarator: [
      (qualified_identifier name: [(identifier) (destructor_name) (operator_name)] @name)
      (qualified_identifier name: (qualified_identifier
        name: [(identifier) (destructor_name) (operator_name)] @name))
      (qualified_identifier name: (qualified_identifier name: (qualified_identifier
        name: [(identifier) (destructor_name) (operator_name)] @name)))
    ] @receiver)
    (pointer_declarator declarator: (function_declarator declarator: [
      (qualified_identifier name: [(identifier) (operator_name)] @name)
      (qualified_identifier name: (qualified_identifier name: [(identifier) (operator_name)] @name))
    ] @receiver))
    (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: [
      (qualified_identifier name: [(identifier) (operator_name)] @name)
      (qualified_identifier name: (qualified_identifier name: [(identifier) (operator_name)] @name))
    ] @receiver)))
    (reference_declarator (function_declarator declarator: [
      (qualified_identifier name: [(identifier) (operator_name)] @name)
      (qualified_identifier name: (qualified_identifier name: [(identifier) (operator_name)] @name))
    ] @receiver))
  ]) @def.method

; function-like macros: `#define MAX(a, b) ...` (the body is the replacement text)
(preproc_function_def
  name: (identifier) @name
  value: (preproc_arg)? @body) @def.function

; ---- types (a specialization `template <> class A<int>` is named `A` too) -------------------
(class_specifier
  name: [(type_identifier) @name (template_type name: (type_identifier) @name)]
  body: (field_declaration_list)) @def.class

[
  (struct_specifier
    name: [(type_identifier) @name (template_type name: (type_identifier) @name)]
    body: (field_declaration_list))
  (union_specifier
    name: [(type_identifier) @name (template_type name: (type_identifier) @name)]
    body: (field_declaration_list))
] @def.struct

(enum_specifier
  name: (type_identifier) @name
  body: (enumerator_list)) @def.enum

; `typedef struct [tag] { ... } name;`
(type_definition
  type: [
    (struct_specifier body: (field_declaration_list) @body)
    (union_specifier body: (field_declaration_list) @body)
    (class_specifier body: (field_declaration_list) @body)
  ]
  declarator: (type_identifier) @name) @def.struct

(type_definition
  type: (enum_specifier body: (enumerator_list) @body)
  declarator: (type_identifier) @name) @def.enum

; every other typedef, and `using Name = T;`
(type_definition
  type: [
    (primitive_type) (type_identifier) (sized_type_specifier) (qualified_identifier)
    (template_type) (dependent_type) (decltype)
    (struct_specifier !body) (union_specifier !body) (enum_specifier !body) (class_specifier !body)
  ]
  declarator: [
    (type_identifier) @name
    (pointer_declarator declarator: (type_identifier) @name)
    (function_declarator declarator: (type_identifier) @name)
    (function_declarator
      declarator: (parenthesized_declarator (pointer_declarator declarator: (type_identifier) @name)))
    (array_declarator declarator: (type_identifier) @name)
  ]) @def.type

(alias_declaration
  name: (type_identifier) @name) @def.type

; ---- inheritance: every base class goes to `extends` ----------------------------------------
[
  (class_specifier (base_class_clause [(type_identifier) (qualified_identifier) (template_type)] @extends))
  (struct_specifier (base_class_clause [(type_identifier) (qualified_identifier) (template_type)] @extends))
] @inherit

; ---- calls: `f()`, `obj.m()`, `p->m()`, `A::f()`, `f<T>()`, and `new T(...)` -----------------
(call_expression
  function: (_) @call.callee
  arguments: (argument_list) @call.args)

(new_expression
  type: (_) @call.new)

; ---- includes ------------------------------------------------------------
(preproc_include) @import

; ---- namespaces (not containers): `namespace a { }`, `namespace a::b { }` -------------------
(namespace_definition
  name: (_) @namespace.name
  body: (declaration_list)) @namespace
