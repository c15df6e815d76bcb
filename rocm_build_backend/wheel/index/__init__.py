"""A static package index per GPU target: ``run`` holds the steps under the output folder's lock."""
