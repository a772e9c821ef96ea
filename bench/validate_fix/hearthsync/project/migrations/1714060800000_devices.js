export const up = (pgm) => {
  pgm.createTable("devices", {
    id: { type: "text", primaryKey: true },
    user_id: { type: "uuid", notNull: true, references: "users" },
    platform: { type: "text", notNull: true },
    last_pull_cursor: { type: "bigint", notNull: true, default: 0 },
    created_at: { type: "timestamptz", notNull: true, default: pgm.func("now()") },
  });
};

export const down = (pgm) => {
  pgm.dropTable("devices");
};
