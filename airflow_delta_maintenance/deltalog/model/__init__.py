"""The Delta protocol's data model: actions, the table schema, features, table properties, log file
names and the Arrow types of actions."""
