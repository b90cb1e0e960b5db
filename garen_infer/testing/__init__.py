"""Public helpers for testing with scripted models: ``methods`` drives a method's search by hand, answers it
with a scripted reranker and scorer, and checks the contract every method keeps; ``answers`` holds a
catalogue of the shapes real models answer in and a scripted model that answers with them."""
