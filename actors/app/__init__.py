"""The application: the CouchDB tree, the main job (demo), the cluster demos, chaos and the workload."""
