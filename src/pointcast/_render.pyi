# The compiled steps of rendering (_render.c) take the same arguments and give the same results
# as their numpy equivalents.
from ._render_numpy import codes as codes, rows as rows, table_index as table_index
