"""Porting CUDA to HIP with the mapping table: `portable ref` (reference.py, the table as a
cheat-sheet), `portable audit` (audit.py: what in a CUDA source will not carry over, per target)
and `portable port` (port.py, port_translate.py: the translation itself)."""
