"""The design-alignment tools: consistency, fix validation, design context, tracing, impact."""
