#!/usr/bin/env python3
"""Fills the report form's fields from a JSON object on stdin."""
import json
import sys

fields = json.load(sys.stdin)
for name, value in sorted(fields.items()):
    print(f"{name}={value}")
