"""pandera contracts for every table that crosses a boundary, and their readers."""
