"""Tidewater: gauge readings from vendors to the lake and the warehouse."""
