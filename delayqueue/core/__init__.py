"""Messages, their Redis keys and Lua scripts, and the queue service over them."""
