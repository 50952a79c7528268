"""The node a program holds: its hosts, its distribution, its lifecycle and its membership."""
