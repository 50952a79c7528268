"""Pure policy of the cluster-wide services (`actors.pg`, `actors.global_names`): no I/O."""
