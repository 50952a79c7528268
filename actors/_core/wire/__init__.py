"""What crosses a process boundary: refs, exit reasons, the frame codec."""
