"""Who is calling: principals, their credentials and grants."""
