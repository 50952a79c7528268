"""An actor: its thread, its state, its death, the gen_server loop; and starting one."""
