"""Path reservations: who is editing what, decided in log order on every node."""
