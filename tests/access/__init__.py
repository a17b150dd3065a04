"""Tests of bzzz.access, and the test JWT issuer other tests reuse."""
