"""The HTTP surface: the Flask app, the API's routes, parameters, access rules, OpenAPI."""
