"""Refused here: see unsupported.py for why."""
from .unsupported import refusing

translate_state_dict_to_hf_gptneo = refusing("gptneo", "translate_state_dict_to_hf_gptneo")
translate_hf_state_dict_to_smdistributed_gptneo = refusing("gptneo", "translate_hf_state_dict_to_smdistributed_gptneo")
