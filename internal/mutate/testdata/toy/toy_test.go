package toy

import "testing"

func TestAdd(t *testing.T) {
	if Add(2, 3) != 5 {
		t.Fatal("Add(2, 3) != 5")
	}
}

func TestSum(t *testing.T) {
	if Sum(4) != 6 {
		t.Fatal("Sum(4) != 6")
	}
}

func TestPositive(t *testing.T) {
	if !Positive(1) || Positive(-1) {
		t.Fatal("Positive is wrong")
	}
}

func TestSign(t *testing.T) {
	if Sign(-3) != -1 || Sign(3) != 1 {
		t.Fatal("Sign is wrong")
	}
}
