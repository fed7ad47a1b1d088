"""What a forward is fed: runtime inputs computed from the config (runtime_inputs.py), real
text (text.py, bounded by text_bounds.py) through the checkpoint's tokenizer (tokenizer.py, its
files checked by tokenizer_files.py, chat templates rendered by chat_template.py), and the host
values bound to a manifest's source tensors by role (bindings.py)."""
