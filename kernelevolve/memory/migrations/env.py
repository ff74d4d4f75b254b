"""alembic's environment: always online, on the connection kernelevolve.memory.migrations passes."""

from alembic import context

from kernelevolve.memory.models import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection, target_metadata=Base.metadata, render_as_batch=connection.dialect.name == "sqlite"
)  # SQLite alters tables by copying them
with context.begin_transaction():
    context.run_migrations()
