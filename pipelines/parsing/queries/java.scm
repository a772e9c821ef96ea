; Java — definitions, calls, imports, inheritance.
; Capture vocabulary: see pipelines/parsing/captures.py.

; ---- definitions -------------------------------------------------------
(class_declaration
  name: (identifier) @name) @def.class

(record_declaration
  name: (identifier) @name) @def.record

(interface_declaration
  name: (identifier) @name) @def.interface

(annotation_type_declaration
  name: (identifier) @name) @def.annotation

; annotation elements (`String value() default "";`) are its methods
(annotation_type_element_declaration
  name: (identifier) @name) @def.method

(enum_declaration
  name: (identifier) @name) @def.enum

; methods (interface methods without a body included)
(method_declaration
  name: (identifier) @name) @def.method

[
  (constructor_declaration name: (identifier) @name)
  (compact_constructor_declaration name: (identifier) @name)
] @def.constructor

; ---- inheritance --------------------------------------------------------
(class_declaration
  superclass: (superclass (_) @extends)) @inherit

[
  (class_declaration interfaces: (super_interfaces (type_list (_) @implements)))
  (enum_declaration interfaces: (super_interfaces (type_list (_) @implements)))
  (record_declaration interfaces: (super_interfaces (type_list (_) @implements)))
] @inherit

(interface_declaration
  (extends_interfaces (type_list (_) @extends))) @inherit

; ---- calls --------------------------------------------------------------
; callee = text from the start of the invocation to the end of the method name
(method_invocation
  name: (identifier) @call.name
  arguments: (argument_list) @call.args) @call

(object_creation_expression
  type: (_) @call.new
  arguments: (argument_list) @call.args)

; `this(...)` / `super(...)` in a constructor: callee `this` / `super`
(explicit_constructor_invocation
  constructor: [(this) (super)] @call.name
  arguments: (argument_list) @call.args) @call

; ---- declared types: the receivers calls can be typed by (see parsing/declared.py) ----
; @decl.scope: where a local or parameter is visible; @decl.member + @decl.owner: the type a field
; belongs to; @decl.name, @decl.type (absent: not stated), @decl.value (a `var`'s initializer)
(_ parameters: (formal_parameters
  (formal_parameter type: (_) @decl.type name: (identifier) @decl.name))) @decl.scope

(lambda_expression parameters: [
  (identifier) @decl.name
  (inferred_parameters (identifier) @decl.name)]) @decl.scope

(_ (local_variable_declaration type: (_) @decl.type
  declarator: (variable_declarator name: (identifier) @decl.name value: (_)? @decl.value))) @decl.scope

(enhanced_for_statement type: (_) @decl.type name: (identifier) @decl.name) @decl.scope

(catch_clause (catch_formal_parameter (catch_type) @decl.type name: (identifier) @decl.name)) @decl.scope

(try_with_resources_statement (resource_specification
  (resource type: (_) @decl.type name: (identifier) @decl.name value: (_) @decl.value))) @decl.scope

(_ name: (identifier) @decl.owner body: [
  (class_body (field_declaration type: (_) @decl.type declarator: (variable_declarator name: (identifier) @decl.name)))
  (interface_body (constant_declaration type: (_) @decl.type declarator: (variable_declarator name: (identifier) @decl.name)))
  (enum_body (enum_body_declarations
    (field_declaration type: (_) @decl.type declarator: (variable_declarator name: (identifier) @decl.name))))
]) @decl.member

; ---- imports ------------------------------------------------------------
(import_declaration) @import

; ---- namespace: the package covers the rest of the file -----------------
(package_declaration
  [(scoped_identifier) (identifier)] @namespace.name) @namespace.file
