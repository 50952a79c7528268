"""The tools around the application: the command line, attach, the status tree, the bench runner, the observer."""
