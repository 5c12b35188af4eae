"""Prefect flows of pointcast."""
