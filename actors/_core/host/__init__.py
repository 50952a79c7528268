"""The processes actors live in: the zygote, warm spares, their scheduling and their logs."""
