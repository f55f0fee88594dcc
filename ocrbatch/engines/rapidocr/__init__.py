"""The embedded engine's plug-in (plugin.py: its name, front class, options and doctor checks) and its checks
(doctor.py). The engine itself is engines/rapid.py, with ppocr.py, cascade.py, int8.py and runtimes.py beside it."""
