"""What runs before anything of a candidate's executes: finding its code in the answer, the static policy."""
